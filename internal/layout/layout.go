// Package layout is the RAID-0 striping math of a file layout: which object
// and object offset hold a file offset, how a file range splits into
// per-object chunks, and how the file size follows from the object sizes.
// Pure functions, no I/O.
//
// A file is cut into stripe-size units dealt round-robin over count objects:
// unit u lives in object u % count at object offset (u / count) * size.
package layout

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

const (
	// MinStripeSize is the smallest stripe size (and the granularity of all
	// stripe sizes), as in Lustre.
	MinStripeSize = 64 << 10
	// MaxStripeSize bounds a stripe size to 4 GiB - 64 KiB.
	MaxStripeSize = 4<<30 - MinStripeSize
	// DefaultStripeSize is used when neither the file nor its directory
	// says otherwise.
	DefaultStripeSize = 1 << 20
	// DefaultStripeCount likewise.
	DefaultStripeCount = 1
	// MaxStripeCount bounds the stripe count.
	MaxStripeCount = 2000
)

// Chunk is a piece of a file range that lies within one stripe unit.
type Chunk struct {
	Stripe  int    // index of the object in the layout
	ObjOff  uint64 // offset within the object
	FileOff uint64 // offset within the file
	Len     uint64
}

// Split cuts the file range [off, off+length) into chunks, in file order.
func Split(stripeSize uint64, count int, off, length uint64) []Chunk {
	if length == 0 || count <= 0 || stripeSize == 0 {
		return nil
	}
	n := (off%stripeSize + length + stripeSize - 1) / stripeSize
	out := make([]Chunk, 0, n)
	end := off + length
	for off < end {
		unit := off / stripeSize
		within := off % stripeSize
		l := stripeSize - within
		if l > end-off {
			l = end - off
		}
		out = append(out, Chunk{
			Stripe:  int(unit % uint64(count)),
			ObjOff:  (unit/uint64(count))*stripeSize + within,
			FileOff: off,
			Len:     l,
		})
		off += l
	}
	return out
}

// ObjectRanges maps the file range [off, off+length) to what it covers of
// each object: one contiguous object range per object it touches (the
// units of one object that a file range covers are consecutive units of
// that object), in stripe order. FileOff is the file offset of the range's
// first byte. Unlike Split, the result has at most count entries however
// long the range: a punch of terabytes is one call per object, not one
// per stripe unit.
func ObjectRanges(stripeSize uint64, count int, off, length uint64) []Chunk {
	if length == 0 || count <= 0 || stripeSize == 0 {
		return nil
	}
	if length > math.MaxUint64-off {
		length = math.MaxUint64 - off
	}
	end := off + length
	row := stripeSize * uint64(count)
	// Every object's first piece lies in the range's first row's worth of
	// bytes, and its last piece in the last row's worth.
	head := Split(stripeSize, count, off, min(length, row))
	tailStart := off
	if length > row {
		tailStart = end - row
	}
	lastEnd := make(map[int]uint64, min(len(head), count))
	for _, t := range Split(stripeSize, count, tailStart, end-tailStart) {
		lastEnd[t.Stripe] = t.ObjOff + t.Len
	}
	out := make([]Chunk, 0, len(lastEnd))
	for _, h := range head {
		// An unaligned row's worth touches its first object twice: the
		// first piece is where the object's range starts.
		if e, ok := lastEnd[h.Stripe]; ok {
			out = append(out, Chunk{Stripe: h.Stripe, ObjOff: h.ObjOff, FileOff: h.FileOff, Len: e - h.ObjOff})
			delete(lastEnd, h.Stripe)
		}
	}
	slices.SortFunc(out, func(a, b Chunk) int { return a.Stripe - b.Stripe })
	return out
}

// FileOffset maps an offset within object `stripe` to the file offset.
func FileOffset(stripeSize uint64, count, stripe int, objOff uint64) uint64 {
	row := objOff / stripeSize
	return (row*uint64(count)+uint64(stripe))*stripeSize + objOff%stripeSize
}

// FileSize is the file size implied by the object sizes: the largest file
// offset, over all objects, one past the object's last byte.
func FileSize(stripeSize uint64, objSizes []uint64) uint64 {
	var size uint64
	for i, s := range objSizes {
		if s == 0 {
			continue
		}
		end := FileOffset(stripeSize, len(objSizes), i, s-1) + 1
		if end > size {
			size = end
		}
	}
	return size
}

// ObjectSize is the size object `stripe` has in a file of fileSize bytes
// whose every byte is written: what truncate must cut each object to.
func ObjectSize(stripeSize uint64, count, stripe int, fileSize uint64) uint64 {
	rowBytes := stripeSize * uint64(count)
	full := fileSize / rowBytes
	rem := fileSize % rowBytes
	size := full * stripeSize
	start := uint64(stripe) * stripeSize
	if rem > start {
		part := rem - start
		if part > stripeSize {
			part = stripeSize
		}
		size += part
	}
	return size
}

// ParseSize parses sizes such as 1M, 64K, 4m, 1G, 65536 (binary units).
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(t, "B")
	t = strings.TrimSuffix(t, "I")
	mult := uint64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional K, M, G or T suffix (e.g. 64K, 1M)", s)
	}
	return v * mult, nil
}

// CheckStripeSize returns an error naming the rule a stripe size breaks.
func CheckStripeSize(size uint64) error {
	if size < MinStripeSize || size%MinStripeSize != 0 || size > MaxStripeSize {
		return fmt.Errorf("stripe size %d is invalid: it must be a multiple of 64K between 64K and 4G-64K", size)
	}
	return nil
}

// FormatSize prints a byte count with a binary unit (1M, 64K, 1.5G).
func FormatSize(v uint64) string {
	units := []string{"", "K", "M", "G", "T", "P"}
	f := float64(v)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f == float64(uint64(f)) {
		return fmt.Sprintf("%d%s", uint64(f), units[i])
	}
	return fmt.Sprintf("%.1f%s", f, units[i])
}
