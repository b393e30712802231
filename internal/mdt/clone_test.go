package mdt

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "nacre/api/nacrepb"
)

// fill sets every field of m, recursively, to a value that differs from
// the zero value and from the values set before (repeated fields get two
// elements), so that a clone that drops or shares any field shows.
func fill(m protoreflect.Message, n *uint64) {
	fs := m.Descriptor().Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				for j := 0; j < l.Len(); j++ {
					fill(l.Get(j).Message(), n) // elements already there too
				}
			}
			for j := 0; j < 2; j++ {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), n)
					l.Append(e)
				} else {
					l.Append(scalar(fd, n))
				}
			}
		case fd.IsMap():
			panic("maps are not expected in inodes: extend fill and cloneInode")
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message(), n)
		default:
			m.Set(fd, scalar(fd, n))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, n *uint64) protoreflect.Value {
	*n++
	v := *n
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(v))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(v))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(v))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(v)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(rune('a' + v%26)))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(v), byte(v >> 8)})
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(1))
	}
	panic("unexpected kind " + fd.Kind().String())
}

func TestCloneInodeCopiesEveryField(t *testing.T) {
	var n uint64
	orig := &pb.Inode{}
	fill(orig.ProtoReflect(), &n)
	snap := proto.Clone(orig)

	c := cloneInode(orig)
	if !proto.Equal(c, orig) {
		t.Fatalf("cloneInode lost fields:\n got  %v\n want %v", c, orig)
	}
	// Everything the clone holds is its own: overwrite the whole tree of
	// the clone and the original must not move.
	n += 1000
	fill(c.ProtoReflect(), &n)
	c.Links[0].Name[0]++
	c.Symlink[0]++
	if !proto.Equal(orig, snap) {
		t.Fatalf("changing the clone changed the original:\n got  %v\n want %v", orig, snap)
	}
	if cloneInode(nil) != nil || cloneInode(&pb.Inode{}).Layout != nil {
		t.Fatal("nil parts must stay nil")
	}
}
