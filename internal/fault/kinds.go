package fault

// Kind is one kind of metadata damage `nacre fault inject` can do: at
// least one for every row of the checker's catalogue (reference §5) that
// applies to Nacre. Its builder, which reads the MDT and returns the
// change, is internal/mdt's faultBuilders[kind]; adding a kind is a row
// of Kinds and a builder there (TestEveryKindHasABuilder keeps them in
// step).
type Kind string

// The kinds, in the order of the catalogue.
const (
	// OI scrub (§5.1)
	OIMissing  Kind = "oi_missing"
	OIStale    Kind = "oi_stale"
	OIConflict Kind = "oi_conflict"
	OIDangling Kind = "oi_dangling"
	// namespace (§5.2)
	DirentFID       Kind = "dirent_fid"
	DirentGarbage   Kind = "dirent_garbage"
	DirentMissing   Kind = "dirent_missing"
	Dangling        Kind = "dangling"
	DanglingDir     Kind = "dangling_dir"
	LinkEAMissing   Kind = "linkea_missing"
	LinkEABad       Kind = "linkea_bad"
	LinkEAExtra     Kind = "linkea_extra"
	LinkEARenamed   Kind = "linkea_renamed"
	LinkEAOverflow  Kind = "linkea_overflow"
	LinkEAStale     Kind = "linkea_stale"
	DirentAlien     Kind = "dirent_alien"
	DirSecondName   Kind = "dir_second_name"
	LinkEAClaim     Kind = "linkea_claim"
	LinkEAUnmatched Kind = "linkea_unmatched"
	NlinkLess       Kind = "nlink_less"
	DirNlink        Kind = "dir_nlink"
	BadType         Kind = "bad_type"
	Orphan          Kind = "orphan"
	OrphanDir       Kind = "orphan_dir"
	LostParent      Kind = "lost_parent"
	// namespace across MDTs (remote directories)
	RemoteDangling Kind = "remote_dangling"
	RemoteLostName Kind = "remote_lost_name"
	// layout (§5.3)
	OSTObjectMissing  Kind = "ost_object_missing"
	PFIDMissingParent Kind = "pfid_missing_parent"
	PFIDOtherFile     Kind = "pfid_other_file"
	StripeIndex       Kind = "stripe_index"
	Owner             Kind = "owner"
	MultipleReference Kind = "multiple_reference"
	SlotLost          Kind = "slot_lost"
	LostMDTObject     Kind = "lost_mdt_object"
	LostLayout        Kind = "lost_layout"
	OrphanNoPFID      Kind = "orphan_nopfid"
	SlotConflict      Kind = "slot_conflict"
)

// Damage is a kind's row of the catalogue: what it damages (Target: a
// file or a directory), the checker Component that finds it and the
// Counter it shows up in, Needs the `nacre lfsck start` options its
// repair needs (without them it is reported only), Count how many
// inconsistencies one injection makes ("stripes": one per stripe of the
// file), and Data what is left of the file's data after the repair.
type Damage struct {
	Kind        Kind   `json:"kind"`
	Component   string `json:"component"`
	Target      string `json:"target"` // file | dir
	Counter     string `json:"counter"`
	Needs       string `json:"needs,omitempty"`
	Count       string `json:"count,omitempty"`
	Data        string `json:"data"` // after the repair: "intact", "stripe-lost", "lost+found", "empty"
	Description string `json:"description"`
}

// Kinds is the catalogue, as `nacre fault list` shows it.
var Kinds = []Damage{
	// OI scrub (§5.1)
	{OIMissing, "scrub", "file", "missing", "", "1", "intact", "delete the object's OI entry (FID -> local key)"},
	{OIStale, "scrub", "file", "stale", "", "1", "intact", "point the object's OI entry at a local key holding no object"},
	{OIConflict, "scrub", "file", "conflict", "", "1", "intact", "store a stale copy of the object under a new local key and point the OI at the copy (two objects claim one FID)"},
	{OIDangling, "scrub", "file", "dangling", "", "1", "intact", "add an OI entry for a FID no object has"},
	// namespace (§5.2)
	{DirentFID, "namespace", "file", "dirent", "", "1", "intact", "make the directory entry name a FID that does not exist (FID-in-dirent differs from the LMA)"},
	{DirentGarbage, "namespace", "file", "dirent", "", "1", "intact", "overwrite the directory entry's value with bytes that do not decode"},
	{DirentMissing, "namespace", "file", "lost_dirent", "", "1", "intact", "remove the directory entry; the object keeps its linkEA (a lost name entry)"},
	{Dangling, "namespace", "file", "dangling", "-C", "1", "empty", "remove the object (its data is destroyed), keep its directory entry"},
	{DanglingDir, "namespace", "dir", "dangling", "-C", "1", "empty", "remove an empty directory's object, keep its entry"},
	{LinkEAMissing, "namespace", "file", "linkea", "", "1", "intact", "clear the object's linkEA"},
	{LinkEABad, "namespace", "file", "linkea", "", "1", "intact", "make the linkEA entry's parent FID insane (version ~0)"},
	{LinkEAExtra, "namespace", "file", "linkea", "", "1", "intact", "add a linkEA entry naming a parent that does not exist"},
	{LinkEARenamed, "namespace", "file", "unmatched_pairs", "", "1", "intact", "rename the linkEA entry of the file's name to a name its directory does not have (the linkEA lacks the real name and holds a stale one)"},
	{LinkEAOverflow, "namespace", "file", "linkea_overflow", "", "1", "intact", "mark the linkEA overflowed (names left out, as past its 4 KiB bound) although it holds every name (Lustre's stale overflow flag)"},
	{LinkEAStale, "namespace", "file", "linkea", "", "1", "intact", "add a linkEA entry naming the file's directory under a name it does not have, nlink unchanged (more linkEA entries than links: the stale one is dropped)"},
	{DirentAlien, "namespace", "file", "dirent", "", "1", "intact", "add a second entry naming the file in its directory, of the wrong type (symlink), that its linkEA does not know (a corrupt entry: removed)"},
	{DirSecondName, "namespace", "dir", "dirent", "", "1", "intact", "add a second entry naming the directory in its parent (the parent's nlink counts it); a directory has one name: the entry its linkEA does not know is removed"},
	{LinkEAClaim, "namespace", "file", "multiple_referenced", "", "1", "intact", "add a linkEA entry claiming the name of another object in the same directory"},
	{LinkEAUnmatched, "namespace", "dir", "unmatched_pairs", "", "1", "intact", "make a directory's linkEA name the root, which has no entry of that name (Lustre's bad `..`)"},
	{NlinkLess, "namespace", "file", "nlinks", "", "1", "intact", "lower the nlink of a file with two names to 1"},
	{DirNlink, "namespace", "dir", "nlinks", "", "1", "intact", "raise a directory's nlink by 3"},
	{BadType, "namespace", "file", "bad_file_type", "", "1", "intact", "store the wrong file type (symlink) in the directory entry"},
	{Orphan, "namespace", "file", "orphan", "-o", "1", "lost+found", "remove the directory entry and the linkEA: nothing names the object"},
	{OrphanDir, "namespace", "dir", "orphan", "-o", "1", "lost+found", "remove a directory's entry and linkEA (its parent's nlink follows)"},
	{LostParent, "namespace", "file", "lost_dirent", "-o", "1", "lost+found", "remove the file's directory (which holds only it) with both entries; the file's linkEA names the lost directory"},
	{RemoteDangling, "namespace", "dir", "remote_dangling", "", "1", "empty", "remove an empty remote directory's object on its MDT, keep its entry on the parent's MDT (a cluster of several MDTs: nacre mkdir -i)"},
	{RemoteLostName, "namespace", "dir", "remote_lost_dirent", "", "1", "intact", "remove a remote directory's entry on the parent's MDT (the parent's nlink follows); the directory keeps its linkEA on its own MDT (a cluster of several MDTs: nacre mkdir -i)"},
	// layout (§5.3)
	{OSTObjectMissing, "layout", "file", "dangling", "-c", "1", "stripe-lost", "delete the OST object of stripe I"},
	{PFIDMissingParent, "layout", "file", "unmatched_pair", "", "1", "intact", "make stripe I's PFID name a FID that does not exist"},
	{PFIDOtherFile, "layout", "file", "unmatched_pair", "", "1", "intact", "make stripe I's PFID name the file's directory, which does not list it"},
	{StripeIndex, "layout", "file", "bad_stripe_index", "", "1", "intact", "store a wrong stripe index in stripe I's PFID"},
	{Owner, "layout", "file", "inconsistent_owner", "", "1", "intact", "change the owner recorded on stripe I's OST object"},
	{MultipleReference, "layout", "file", "multiple_referenced", "", "1", "stripe-lost", "make stripe I name the OST object of another written file in the same directory (the file's own object is destroyed)"},
	{SlotLost, "layout", "file", "orphan", "-o", "1", "intact", "make stripe I name an object id the OST does not have; the real object stays, its PFID claiming the slot (put back in the slot, also with -c: Lustre's test 18d)"},
	{LostMDTObject, "layout", "file", "orphan", "-o", "stripes", "lost+found", "remove the file's MDT object and name, keep its OST objects (adopted as <FID>-R-0)"},
	{LostLayout, "layout", "file", "orphan", "-o", "stripes", "intact", "drop the file's layout; its OST objects become orphans that point back"},
	{OrphanNoPFID, "layout", "file", "orphan", "-o", "stripes", "lost+found", "remove the file's MDT object and name, and the PFIDs of its OST objects (adopted as <newFID>-N-0)"},
	{SlotConflict, "layout", "file", "orphan", "-o", "1", "stripe-lost", "put a new object in stripe I; the old one still claims the slot (adopted as <FID>-C-0)"},
}

// LookupKind finds a kind by name.
func LookupKind(name string) (Damage, bool) {
	for _, k := range Kinds {
		if string(k.Kind) == name {
			return k, true
		}
	}
	return Damage{}, false
}

// OnParentMDT reports whether kind damages the parent's MDT rather than
// the object's (they differ for a remote directory).
func OnParentMDT(kind Kind) bool { return kind == RemoteLostName }

// MDTsNeeded is how many MDTs the fixture of kind needs: 2 for the kinds
// of remote directories, else 1.
func MDTsNeeded(kind Kind) int {
	if kind == RemoteDangling || kind == RemoteLostName {
		return 2
	}
	return 1
}
