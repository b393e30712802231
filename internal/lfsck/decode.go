package lfsck

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"nacre/internal/fid"
)

// A fast, allocation-free decoder of the MDT's object records
// (nacrepb.Inode): the scan reads every object once, and proto.Unmarshal
// would allocate a message, its links and its layout for each. Names point
// into the record's bytes (valid until the iterator moves). Garbage gives
// an error, never a panic.

type link struct {
	parent fid.FID
	name   []byte
	remote bool // the parent is on another MDT (pb.LinkEntry.remote)
}

type stripe struct {
	ost      uint32
	seq, oid uint64
}

type layoutEA struct {
	pattern, stripeSize, gen uint32
	stripeCount, offset      int32
	objs                     []stripe
}

type object struct {
	fid                                  fid.FID
	mode, uid, gid, projid, nlink, flags uint32
	size                                 uint64
	mtime                                int64
	linksOverflow                        uint64 // Inode.links_overflow_index
	links                                []link
	hasLayout                            bool
	layout                               layoutEA
	ostSeq                               seqField // kept by reset
}

// seqField is the encoding of a stripe's seq field (tag and varint) for
// one object sequence: the stripes of the scan's own files all carry the
// same one, and comparing its bytes is cheaper than decoding them.
type seqField struct {
	seq       uint64
	n         int
	b         [11]byte
	mask, val uint64 // the first 8 bytes of b, little endian, under a mask of n bytes (n <= 8)
}

func newSeqField(seq uint64) seqField {
	f := seqField{seq: seq}
	enc := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), seq)
	f.n = copy(f.b[:], enc)
	if f.n <= 8 {
		f.mask = 1<<(8*f.n) - 1
		if f.n == 8 {
			f.mask = ^uint64(0)
		}
		f.val = binary.LittleEndian.Uint64(f.b[:8]) & f.mask
	}
	return f
}

// is tells whether v starts with the field.
func (f *seqField) is(v []byte) bool {
	if f.mask != 0 && len(v) >= 8 {
		return binary.LittleEndian.Uint64(v)&f.mask == f.val
	}
	return f.n > 0 && len(v) >= f.n && string(v[:f.n]) == string(f.b[:f.n])
}

var errGarbage = errors.New("undecodable record")

func (o *object) reset() {
	links, objs, seq := o.links[:0], o.layout.objs[:0], o.ostSeq
	*o = object{}
	o.links, o.layout.objs, o.ostSeq = links, objs, seq
}

// decodeFID and decodeStripe repeat one varint loop on purpose: a shared
// loop with a callback costs about a quarter more per FID and stripe
// pair, on the scan's hottest path.
func decodeFID(b []byte) (fid.FID, error) {
	var f fid.FID
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return f, errGarbage
		}
		b = b[n:]
		if typ != protowire.VarintType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return f, errGarbage
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return f, errGarbage
		}
		b = b[m:]
		switch num {
		case 1:
			f.Seq = v
		case 2:
			f.Oid = uint32(v)
		case 3:
			f.Ver = uint32(v)
		}
	}
	return f, nil
}

func decodeLink(b []byte) (link, error) {
	var l link
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return l, errGarbage
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == 1 || num == 2) {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return l, errGarbage
			}
			b = b[m:]
			if num == 1 {
				f, err := decodeFID(v)
				if err != nil {
					return l, err
				}
				l.parent = f
			} else {
				l.name = v
			}
			continue
		}
		if typ == protowire.VarintType && num == 3 {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return l, errGarbage
			}
			b = b[m:]
			l.remote = v != 0
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return l, errGarbage
		}
		b = b[m:]
	}
	return l, nil
}

// fastStripe decodes a stripe the way the MDT writes them (one-byte tags
// of fields 1 to 3, varints); ok is false for anything else, which
// decodeStripe then reads. The layout check decodes every stripe of every
// file, and the generic reader was a third of the MDT's work per stripe
// (BenchmarkDecodeStripes).
func fastStripe(b []byte) (s stripe, ok bool) {
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		var v uint64
		i := 0
		for ; ; i++ {
			if i == len(b) || i == 10 {
				return s, false
			}
			c := b[i]
			v |= uint64(c&0x7f) << (7 * i)
			if c < 0x80 {
				break
			}
		}
		b = b[i+1:]
		switch tag {
		case 1<<3 | 0:
			if v > 0xffffffff {
				return s, false
			}
			s.ost = uint32(v)
		case 2<<3 | 0:
			s.seq = v
		case 3<<3 | 0:
			s.oid = v
		default:
			return s, false
		}
	}
	return s, true
}

// stripe decodes a stripe of sequence f.seq as the MDT writes it (an OST
// index under 128, the seq field, an object id); ok is false for anything
// else, which decodeStripe then reads. Less than half fastStripe's cost
// (BenchmarkDecodeStripes), on the part of the layout check that grows
// with the number of OSTs.
func (f *seqField) stripe(v []byte) (s stripe, ok bool) {
	if len(v) >= 2 && v[0] == 1<<3 {
		if v[1] >= 0x80 {
			return s, false
		}
		s.ost = uint32(v[1])
		v = v[2:]
	}
	if !f.is(v) {
		return s, false
	}
	s.seq = f.seq
	v = v[f.n:]
	if len(v) == 0 {
		return s, true // object id 0
	}
	if len(v) < 2 || v[0] != 3<<3 || len(v) > 10 {
		return s, false
	}
	var x uint64
	for i, c := range v[1:] {
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i != len(v)-2 {
				return s, false
			}
			s.oid = x
			return s, true
		}
	}
	return s, false
}

func decodeStripe(b []byte) (stripe, error) {
	if s, ok := fastStripe(b); ok {
		return s, nil
	}
	var s stripe
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, errGarbage
		}
		b = b[n:]
		if typ != protowire.VarintType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return s, errGarbage
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return s, errGarbage
		}
		b = b[m:]
		switch num {
		case 1:
			s.ost = uint32(v)
		case 2:
			s.seq = v
		case 3:
			s.oid = v
		}
	}
	return s, nil
}

func (o *object) decodeLayout(b []byte) error {
	l := &o.layout
	for len(b) > 0 {
		// A stripe as the MDT writes it: tag of field 6 (bytes), a
		// one-byte length and the stripe; read without the generic
		// reader, which costs several times as much.
		if len(b) >= 2 && b[0] == 6<<3|2 && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
			v := b[2 : 2+b[1]]
			b = b[2+b[1]:]
			// The commonest stripes, read here rather than by a call: an
			// OST index under 128 (index 0 is left out, as proto3 does),
			// the scan's sequence field (its bytes compared at once), an
			// object id of 1 to 3 bytes. Half the cost of a call to
			// stripe (BenchmarkDecodeStripes); FuzzDecodeLayoutQuick
			// checks it against stripe.
			if f, at := &o.ostSeq, 0; f.mask != 0 && len(v) >= 10 {
				var ost uint32
				if v[0] == 1<<3 {
					ost, at = uint32(v[1]), 2
				}
				if ost < 0x80 && len(v)-at >= 8 && binary.LittleEndian.Uint64(v[at:])&f.mask == f.val {
					if r := v[at+f.n:]; len(r) >= 2 && r[0] == 3<<3 {
						switch {
						case len(r) == 2 && r[1] < 0x80:
							l.objs = append(l.objs, stripe{ost: ost, seq: f.seq, oid: uint64(r[1])})
							continue
						case len(r) == 3 && r[1] >= 0x80 && r[2] < 0x80:
							l.objs = append(l.objs, stripe{ost: ost, seq: f.seq, oid: uint64(r[1]&0x7f) | uint64(r[2])<<7})
							continue
						case len(r) == 4 && r[1] >= 0x80 && r[2] >= 0x80 && r[3] < 0x80:
							l.objs = append(l.objs, stripe{ost: ost, seq: f.seq,
								oid: uint64(r[1]&0x7f) | uint64(r[2]&0x7f)<<7 | uint64(r[3])<<14})
							continue
						}
					}
				}
			}
			s, ok := o.ostSeq.stripe(v)
			if !ok {
				var err error
				if s, err = decodeStripe(v); err != nil {
					return err
				}
			}
			l.objs = append(l.objs, s)
			continue
		}
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errGarbage
		}
		b = b[n:]
		if num == 6 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return errGarbage
			}
			b = b[m:]
			s, err := decodeStripe(v)
			if err != nil {
				return err
			}
			l.objs = append(l.objs, s)
			continue
		}
		if typ != protowire.VarintType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return errGarbage
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return errGarbage
		}
		b = b[m:]
		switch num {
		case 1:
			l.pattern = uint32(v)
		case 2:
			l.stripeSize = uint32(v)
		case 3:
			l.stripeCount = int32(v)
		case 4:
			l.offset = int32(v)
		case 5:
			l.gen = uint32(v)
		}
	}
	return nil
}

// decode parses an object record into o (reset first).
func (o *object) decode(b []byte) error { return o.decodeSome(b, true) }

// decodeSome is decode that leaves the stripes out unless withLayout: a run
// of the namespace check alone does not read them, and decoding them was
// 9 % of its CPU at 2 million files (hasLayout is still set).
func (o *object) decodeSome(b []byte, withLayout bool) error {
	o.reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errGarbage
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 14 || num == 15):
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return errGarbage
			}
			b = b[m:]
			switch num {
			case 1:
				f, err := decodeFID(v)
				if err != nil {
					return err
				}
				o.fid = f
			case 14:
				l, err := decodeLink(v)
				if err != nil {
					return err
				}
				o.links = append(o.links, l)
			case 15:
				o.hasLayout = true
				if !withLayout {
					break
				}
				if err := o.decodeLayout(v); err != nil {
					return err
				}
			}
		case typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return errGarbage
			}
			b = b[m:]
			switch num {
			case 2:
				o.mode = uint32(v)
			case 3:
				o.uid = uint32(v)
			case 4:
				o.gid = uint32(v)
			case 5:
				o.projid = uint32(v)
			case 6:
				o.nlink = uint32(v)
			case 7:
				o.size = v
			case 10:
				o.mtime = int64(v)
			case 13:
				o.flags = uint32(v)
			case 20:
				o.linksOverflow = v
			}
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return errGarbage
			}
			b = b[m:]
		}
	}
	if o.fid.IsZero() {
		return errGarbage
	}
	return nil
}
