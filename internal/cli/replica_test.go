package cli

import (
	"context"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
)

// An add to an address where nothing answers, of a replica that
// registered with the MGS at another address, is a typo: refused naming
// the address to give (the add would make a learner that never catches
// up, and the id could not be added again).
func TestAddOfAMistypedAddressNamesTheRegisteredOne(t *testing.T) {
	err := checkJoiner(context.Background(), &pb.RaftMembersReply{}, "MDT0", 7, "127.0.0.1:1", "127.0.0.27:7101")
	if err == nil || !strings.Contains(err.Error(), "give --addr 127.0.0.27:7101") {
		t.Fatalf("checkJoiner: %v", err)
	}
	if err := checkJoiner(context.Background(), &pb.RaftMembersReply{}, "MDT0", 7, "127.0.0.1:1", ""); err != nil {
		t.Fatalf("a replica not started yet (not registered) is left to the add: %v", err)
	}
}
