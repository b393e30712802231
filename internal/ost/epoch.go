package ost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"nacre/internal/kv"
)

// The epoch names what this OST's acknowledged but unsynced writes
// survive. A write is acknowledged once it is in the page cache; only a
// sync makes it durable, and clients keep no copy. A start after a clean
// stop (which synced everything) keeps the epoch, and so does a start
// after the process alone died: the same kernel and the same mount of the
// object directory still hold every acknowledged write in their page
// cache, which the start syncs first. Any other start (a power cut, a
// crash of the machine, the file system unmounted or shut down) takes a
// new epoch: writes acknowledged before it may be gone. The bulk server
// puts the epoch in its replies to changes of data; a client whose sync
// answers with another epoch than its writes got reports EIO
// (client.File.Sync) instead of calling them durable.

var epochKey = []byte{'e'}

// epochRec is the record under epochKey.
type epochRec struct {
	Epoch uint64 `json:"epoch"`
	Clean bool   `json:"clean"` // the last run stopped with everything synced
	Boot  string `json:"boot"`  // the kernel's boot id then
	Mount string `json:"mount"` // the mount of the object directory then
}

// Epoch is this start's epoch (see epochRec).
func (s *Store) Epoch() uint64 { return s.epoch }

// startEpoch decides this start's epoch and records it, as unclean until
// Close.
func (s *Store) startEpoch() error {
	var prev epochRec
	switch v, err := s.db.Get(epochKey); {
	case err == nil:
		if err := json.Unmarshal(v, &prev); err != nil {
			return fmt.Errorf("epoch record %q: %v: %w", v, err, ErrCorrupt)
		}
	case !errors.Is(err, kv.ErrNotFound):
		return err
	}
	now := epochRec{Epoch: prev.Epoch, Boot: kernelBoot(), Mount: mountOf(s.objDir)}
	switch {
	case prev.Epoch == 0:
		now.Epoch = 1
	case prev.Clean:
	case now.Boot != "" && now.Mount != "" && now.Boot == prev.Boot && now.Mount == prev.Mount:
		// Only the process died: what it acknowledged is in the page
		// cache; make it durable before anything else is acknowledged.
		if err := syncfs(s.objDir); err != nil {
			return err
		}
	default:
		now.Epoch = prev.Epoch + 1
		s.log.Warn("the OST did not stop cleanly, and its machine or file system restarted since: writes it acknowledged but had not synced may be lost; clients that made them get EIO from fsync and close",
			"epoch", now.Epoch)
	}
	if err := s.putEpoch(now); err != nil {
		return err
	}
	s.epoch, s.epochRec = now.Epoch, now
	return nil
}

// endEpoch records a clean stop: everything acknowledged is synced.
func (s *Store) endEpoch() error {
	if err := syncfs(s.objDir); err != nil {
		return err
	}
	rec := s.epochRec
	rec.Clean = true
	return s.putEpoch(rec)
}

func (s *Store) putEpoch(r epochRec) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Set(epochKey, b, true)
}

// kernelBoot is the running kernel's boot id ("" if unknown).
func kernelBoot() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// mountOf names the mount instance dir is on: the kernel's unique mount
// id, never reused while it runs ("" if the kernel has none: then every
// unclean stop takes a new epoch).
func mountOf(dir string) string {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID_UNIQUE, &st); err != nil || st.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		return ""
	}
	return strconv.FormatUint(st.Mnt_id, 10)
}

// syncfs makes everything written to the file system of dir durable.
func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
