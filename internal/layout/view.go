package layout

// What a striped file's data looks like from its objects' side, and what
// it reads back as when some objects are missing: the checker's tests
// compare files rebuilt from some of their stripes with these.

// ObjectData is what the object of stripe s holds when a file of data is
// written with stripe size ss over count stripes.
func ObjectData(data []byte, ss uint64, count, s int) []byte {
	var out []byte
	for _, ch := range Split(ss, count, 0, uint64(len(data))) {
		if ch.Stripe != s {
			continue
		}
		if need := int(ch.ObjOff + ch.Len); need > len(out) {
			out = append(out, make([]byte, need-len(out))...)
		}
		copy(out[ch.ObjOff:], data[ch.FileOff:ch.FileOff+ch.Len])
	}
	return out
}

// View is what a file of data (stripe size ss, count stripes) reads back
// as when only its stripes in keep hold their data and the others read as
// zeros, cut or padded to size bytes (0: len(data)).
func View(data []byte, ss uint64, count int, keep map[int]bool, size int) []byte {
	if size == 0 {
		size = len(data)
	}
	out := make([]byte, size)
	for _, ch := range Split(ss, count, 0, uint64(len(data))) {
		if end := min(int(ch.FileOff+ch.Len), size); keep[ch.Stripe] && int(ch.FileOff) < end {
			copy(out[ch.FileOff:end], data[ch.FileOff:end])
		}
	}
	return out
}

// EndOfStripe is the size of a file of n bytes (stripe size ss, count
// stripes) when stripe s is its only data: the end of s's last chunk.
func EndOfStripe(n int, ss uint64, count, s int) int {
	end := 0
	for _, ch := range Split(ss, count, 0, uint64(n)) {
		if ch.Stripe == s {
			end = int(ch.FileOff + ch.Len)
		}
	}
	return end
}
