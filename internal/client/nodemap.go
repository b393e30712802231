package client

import (
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/nodemap"
)

// The client's nodemap (internal/nodemap): the MDSs map the ids of this
// client's requests by the nodemap of its certificate, and the MGS says
// which one that is with the configuration. The client checks access
// itself before it reads or cuts objects (MayAccess; the OSTs check
// nothing), and does so as the MDSs see the caller (LocalCred): a
// squashed root is the squash uid there, not root. It learns a change
// at its next configuration read (a mount: within 30 s; the MDSs, which
// decide every metadata operation, within about a second).

// setNodemap records the nodemap the MGS gave (nil: none applies).
func (c *Client) setNodemap(e *pb.Nodemap) {
	if old := c.idmap.Load(); (old == nil && e == nil) || (old != nil && proto.Equal(old.Nodemap(), e)) {
		return
	}
	if e == nil {
		c.idmap.Store(nil)
		return
	}
	c.idmap.Store(nodemap.New(e))
	c.log.Info("nodemap applies to this client", "client", e.Client, "squash_root", e.SquashRoot, "trusted", e.Trusted)
}

// Nodemap is the nodemap that applies to this client (nil: ids are used
// as sent).
func (c *Client) Nodemap() *pb.Nodemap { return c.idmap.Load().Nodemap() }

// LocalCred is cred as the MDSs see it, in this client's ids
// (nodemap.Map.Local): what this client's own access checks use.
func (c *Client) LocalCred(cred *pb.Cred) *pb.Cred { return c.idmap.Load().Local(cred) }
