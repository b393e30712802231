package fault

// Kind is one kind of metadata damage `nacre fault inject` can do: at
// least one for every row of the checker's catalogue (reference §5) that
// applies to Nacre. Counter is the checker counter it shows up in,
// Needs the `nacre lfsck start` options its repair needs (without them it
// is reported only), Count how many inconsistencies one injection makes
// ("stripes": one per stripe of the file).
type Kind struct {
	Kind        string `json:"kind"`
	Component   string `json:"component"`
	Target      string `json:"target"` // file | dir
	Counter     string `json:"counter"`
	Needs       string `json:"needs,omitempty"`
	Count       string `json:"count,omitempty"`
	Data        string `json:"data"` // after the repair: "intact", "stripe-lost", "lost+found", "empty"
	Description string `json:"description"`
}

// Kinds is the catalogue.
var Kinds = []Kind{
	// OI scrub (§5.1)
	{"oi_missing", "scrub", "file", "missing", "", "1", "intact", "delete the object's OI entry (FID -> local key)"},
	{"oi_stale", "scrub", "file", "stale", "", "1", "intact", "point the object's OI entry at a local key holding no object"},
	{"oi_conflict", "scrub", "file", "conflict", "", "1", "intact", "store a stale copy of the object under a new local key and point the OI at the copy (two objects claim one FID)"},
	{"oi_dangling", "scrub", "file", "dangling", "", "1", "intact", "add an OI entry for a FID no object has"},
	// namespace (§5.2)
	{"dirent_fid", "namespace", "file", "dirent", "", "1", "intact", "make the directory entry name a FID that does not exist (FID-in-dirent differs from the LMA)"},
	{"dirent_garbage", "namespace", "file", "dirent", "", "1", "intact", "overwrite the directory entry's value with bytes that do not decode"},
	{"dirent_missing", "namespace", "file", "lost_dirent", "", "1", "intact", "remove the directory entry; the object keeps its linkEA (a lost name entry)"},
	{"dangling", "namespace", "file", "dangling", "-C", "1", "empty", "remove the object (its data is destroyed), keep its directory entry"},
	{"dangling_dir", "namespace", "dir", "dangling", "-C", "1", "empty", "remove an empty directory's object, keep its entry"},
	{"linkea_missing", "namespace", "file", "linkea", "", "1", "intact", "clear the object's linkEA"},
	{"linkea_bad", "namespace", "file", "linkea", "", "1", "intact", "make the linkEA entry's parent FID insane (version ~0)"},
	{"linkea_extra", "namespace", "file", "linkea", "", "1", "intact", "add a linkEA entry naming a parent that does not exist"},
	{"linkea_renamed", "namespace", "file", "unmatched_pairs", "", "1", "intact", "rename the linkEA entry of the file's name to a name its directory does not have (the linkEA lacks the real name and holds a stale one)"},
	{"linkea_overflow", "namespace", "file", "linkea_overflow", "", "1", "intact", "mark the linkEA overflowed (names left out, as past its 4 KiB bound) although it holds every name (Lustre's stale overflow flag)"},
	{"linkea_stale", "namespace", "file", "linkea", "", "1", "intact", "add a linkEA entry naming the file's directory under a name it does not have, nlink unchanged (more linkEA entries than links: the stale one is dropped)"},
	{"dirent_alien", "namespace", "file", "dirent", "", "1", "intact", "add a second entry naming the file in its directory, of the wrong type (symlink), that its linkEA does not know (a corrupt entry: removed)"},
	{"dir_second_name", "namespace", "dir", "dirent", "", "1", "intact", "add a second entry naming the directory in its parent (the parent's nlink counts it); a directory has one name: the entry its linkEA does not know is removed"},
	{"linkea_claim", "namespace", "file", "multiple_referenced", "", "1", "intact", "add a linkEA entry claiming the name of another object in the same directory"},
	{"linkea_unmatched", "namespace", "dir", "unmatched_pairs", "", "1", "intact", "make a directory's linkEA name the root, which has no entry of that name (Lustre's bad `..`)"},
	{"nlink_less", "namespace", "file", "nlinks", "", "1", "intact", "lower the nlink of a file with two names to 1"},
	{"dir_nlink", "namespace", "dir", "nlinks", "", "1", "intact", "raise a directory's nlink by 3"},
	{"bad_type", "namespace", "file", "bad_file_type", "", "1", "intact", "store the wrong file type (symlink) in the directory entry"},
	{"orphan", "namespace", "file", "orphan", "-o", "1", "lost+found", "remove the directory entry and the linkEA: nothing names the object"},
	{"orphan_dir", "namespace", "dir", "orphan", "-o", "1", "lost+found", "remove a directory's entry and linkEA (its parent's nlink follows)"},
	{"lost_parent", "namespace", "file", "lost_dirent", "-o", "1", "lost+found", "remove the file's directory (which holds only it) with both entries; the file's linkEA names the lost directory"},
	// layout (§5.3)
	{"ost_object_missing", "layout", "file", "dangling", "-c", "1", "stripe-lost", "delete the OST object of stripe I"},
	{"pfid_missing_parent", "layout", "file", "unmatched_pair", "", "1", "intact", "make stripe I's PFID name a FID that does not exist"},
	{"pfid_other_file", "layout", "file", "unmatched_pair", "", "1", "intact", "make stripe I's PFID name the file's directory, which does not list it"},
	{"stripe_index", "layout", "file", "bad_stripe_index", "", "1", "intact", "store a wrong stripe index in stripe I's PFID"},
	{"owner", "layout", "file", "inconsistent_owner", "", "1", "intact", "change the owner recorded on stripe I's OST object"},
	{"multiple_reference", "layout", "file", "multiple_referenced", "", "1", "stripe-lost", "make stripe I name the OST object of another written file in the same directory (the file's own object is destroyed)"},
	{"slot_lost", "layout", "file", "orphan", "-o", "1", "intact", "make stripe I name an object id the OST does not have; the real object stays, its PFID claiming the slot (put back in the slot, also with -c: Lustre's test 18d)"},
	{"lost_mdt_object", "layout", "file", "orphan", "-o", "stripes", "lost+found", "remove the file's MDT object and name, keep its OST objects (adopted as <FID>-R-0)"},
	{"lost_layout", "layout", "file", "orphan", "-o", "stripes", "intact", "drop the file's layout; its OST objects become orphans that point back"},
	{"orphan_nopfid", "layout", "file", "orphan", "-o", "stripes", "lost+found", "remove the file's MDT object and name, and the PFIDs of its OST objects (adopted as <newFID>-N-0)"},
	{"slot_conflict", "layout", "file", "orphan", "-o", "1", "stripe-lost", "put a new object in stripe I; the old one still claims the slot (adopted as <FID>-C-0)"},
}

// LookupKind finds a kind by name.
func LookupKind(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Kind == name {
			return k, true
		}
	}
	return Kind{}, false
}
