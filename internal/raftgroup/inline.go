package raftgroup

import (
	"fmt"
	"runtime/debug"
)

// Inline turns.
//
// A lazy proposal on a replica that leads alone (Group.Lazy) needs no
// other replica and no fsync before its answer: what stands between the
// proposer and its result is the loop's own work (step the proposal,
// write the entry, apply it). Handing that work to the loop goroutine and
// the result back costs two goroutine wake-ups per proposal, each a futex
// call and often a wake-up of an idle processor: on a metadata server
// answering one client, more CPU than raft's own bookkeeping. So the
// proposer takes the loop's turn itself when nobody holds it (takeTurn)
// and steps while work is queued: its own proposal, and whatever others
// queued meanwhile, answered as the loop would answer them. A proposer
// that finds the turn taken only waits: the holder sees its proposal. The
// loop goroutine keeps everything else (ticks, the commit window's sync,
// Status, followers' messages), and every one of its steps holds the turn
// too, so the loop's state has one owner at a time.

// maxInlineSteps bounds the steps a proposer does in one turn; work
// still queued after them is left to the loop.
const maxInlineSteps = 8

// takeTurn does the loop's work on the caller's goroutine while any is
// queued, if no one holds the turn. If someone does, the caller's
// proposal (queued before the call) is not left behind: every holder
// looks at the inbox after it lets go of the turn (a proposer here, the
// loop before it waits), and steps it or wakes the loop.
func (g *Group) takeTurn() {
	if !g.turn.TryLock() {
		return
	}
	if g.runTurn() || !g.in.empty() {
		g.signal()
	}
}

// runTurn steps while work is queued, then lets go of the turn. It
// reports whether the loop must see to what is left: more work than
// maxInlineSteps, or a failure that stops the group.
func (g *Group) runTurn() (wake bool) {
	defer g.turn.Unlock()
	if g.exited {
		return false // the proposer hears of it from Group.done
	}
	if g.stepErr != nil {
		return true
	}
	g.inTurn = true
	g.stats.inlineTurns.Add(1)
	defer func() {
		g.inTurn = false
		if r := recover(); r != nil {
			// The loop stops with it, as if the panic had been its own.
			g.stepErr = fmt.Errorf("panic in raft loop (a proposer's turn): %v\n%s", r, debug.Stack())
			wake = true
		}
	}()
	for range maxInlineSteps {
		if err := g.step(); err != nil {
			g.stepErr = err
			return true
		}
		if !g.busy() && g.in.empty() {
			return false
		}
	}
	return true
}
