package client

import (
	"testing"

	pb "nacre/api/nacrepb"
)

func logged(idx ...uint64) []*pb.LoggedCommand {
	var out []*pb.LoggedCommand
	for _, i := range idx {
		out = append(out, &pb.LoggedCommand{Index: i, Term: 2, Command: []byte{byte(i)}})
	}
	return out
}

func indexes(k *keptLog) []uint64 {
	var out []uint64
	for _, e := range k.ents {
		out = append(out, e.Index)
	}
	return out
}

// TestKeptLogKeepsWhatIsNotSynced: a client keeps every entry a reply
// hands it until a reply says the MDT synced it, says what it holds in
// its next request, and keeps nothing for an MDT that synced first.
func TestKeptLogKeepsWhatIsNotSynced(t *testing.T) {
	k := &keptLog{}
	steps := []struct {
		name       string
		reply      *pb.Reply
		want       []uint64
		have       uint64
		startWatch bool
	}{
		{"synced before the answer", &pb.Reply{Index: 5}, nil, 0, false},
		{"first unsynced answer", &pb.Reply{Index: 9, Committed: 6, Replay: logged(7, 8, 9)}, []uint64{7, 8, 9}, 9, true},
		{"out of order, with a duplicate", &pb.Reply{Index: 8, Committed: 6, Replay: logged(8)}, []uint64{7, 8, 9}, 9, false},
		{"another client's entries", &pb.Reply{Index: 12, Committed: 7, Replay: logged(10, 11, 12)}, []uint64{8, 9, 10, 11, 12}, 12, false},
		{"all synced", &pb.Reply{Index: 13, Committed: 13}, nil, 13, false},
	}
	for _, s := range steps {
		if got := k.absorb(s.reply); got != s.startWatch {
			t.Errorf("%s: watch %v, want %v", s.name, got, s.startWatch)
		}
		if got := indexes(k); len(got) != len(s.want) || (len(got) > 0 && (got[0] != s.want[0] || got[len(got)-1] != s.want[len(s.want)-1])) {
			t.Errorf("%s: keeps %v, want %v", s.name, got, s.want)
		}
		cmd := &pb.Command{}
		k.prepare(cmd)
		if cmd.ReplayHave != s.have || !cmd.Keeps {
			t.Errorf("%s: next request says it holds up to %d (keeps %v), want %d", s.name, cmd.ReplayHave, cmd.Keeps, s.have)
		}
	}
	if k.unsynced() {
		t.Error("a client whose entries are all synced says it holds unsynced ones")
	}
}
