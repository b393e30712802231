package raftgroup

import (
	"encoding/binary"
	"fmt"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/internal/kv"
)

// TestFollowerRestartsAfterInstallingASnapshotWithANewerImage: the image
// that comes with a snapshot may be newer than its index (snapshot.go),
// so after the install the state machine is ahead of the log until the
// leader's next entries arrive. A crash in that window, after the install
// or in the middle of it, must leave a replica that starts, with a commit
// index raft accepts (at most the last index), and not one refused as
// damaged.
func TestFollowerRestartsAfterInstallingASnapshotWithANewerImage(t *testing.T) {
	const (
		snapIndex = 20
		snapTerm  = 3
		imageAt   = 23 // the leader applied 3 more entries before it took the image
	)
	for _, finished := range []bool{true, false} {
		t.Run(fmt.Sprintf("install finished=%v", finished), func(t *testing.T) {
			db, _ := kv.OpenMem()
			defer db.Close()
			peers := []Peer{{ID: 1, Addr: "mem-1"}, {ID: 2, Addr: "mem-2"}, {ID: 3, Addr: "mem-3"}}
			k := newKeys([]byte("\x00r"))
			loc := logLoc{fs: db.FS(), dir: defaultLogDir(db, 1)}
			s, err := openLog(db, k, loc, &pb.ConfState{Voters: []uint64{1, 2, 3}}, 1<<20, 2, false)
			if err != nil {
				t.Fatal(err)
			}
			appendAndCommit(t, s, ent(2, 2, ""), ent(3, 2, ""), ent(4, 2, ""))
			if err := s.setHardState(&pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(4))}); err != nil {
				t.Fatal(err)
			}
			// The install (installSnapshot): the marker, Restore of the
			// image (its applied index is 23), the store synced, then the
			// log reset and the marker removed, or a crash before.
			meta := &pb.SnapshotMetadata{Index: new(uint64(snapIndex)), Term: new(uint64(snapTerm)),
				ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}
			mv, _ := proto.Marshal(meta)
			db.Set(k.pending, mv, false)
			db.Set(smApplied, binary.BigEndian.AppendUint64(nil, imageAt), true)
			if finished {
				if err := s.resetTo(meta); err != nil {
					t.Fatal(err)
				}
				if err := s.setHardState(&pb.HardState{Term: new(uint64(snapTerm)), Vote: new(uint64(0)), Commit: new(uint64(snapIndex))}); err != nil {
					t.Fatal(err)
				}
				if err := s.log.Write(true); err != nil {
					t.Fatal(err)
				}
				if err := s.release(); err != nil {
					t.Fatal(err)
				}
				db.Delete(k.pending, true)
			} else if err := s.log.Write(true); err != nil {
				t.Fatal(err)
			}
			s.log.Close()

			cfg := Config{GroupID: 1, ID: 2, Peers: peers, DB: db, Prefix: []byte("\x00r"),
				SM: newTestSM(t, db), Transport: NewMemNetwork().Transport("mem-2"), Log: testLog()}
			testTiming(&cfg)
			g, err := Start(cfg)
			if err != nil {
				t.Fatalf("restart of a follower whose image is at %d and log reset to %d: %v", imageAt, snapIndex, err)
			}
			defer g.Stop()
			st := g.Status()
			if st.FirstIndex != snapIndex+1 || st.LastIndex != snapIndex || st.Commit > st.LastIndex || st.Applied != imageAt {
				t.Fatalf("after the restart: log [%d, %d], commit %d, applied %d; want [%d, %d], commit <= %d, applied %d",
					st.FirstIndex, st.LastIndex, st.Commit, st.Applied, snapIndex+1, snapIndex, snapIndex, imageAt)
			}
		})
	}
}
