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
// proposer takes the loop's turn itself when nobody holds it (takeTurn),
// does the steps until its proposal is answered, and gives the turn back;
// proposals queued meanwhile by others are stepped and answered in the
// same turns, as the loop would. When the turn is taken the proposer
// wakes the loop as before and waits. The loop goroutine keeps everything
// else (ticks, the commit window's sync, status, followers' messages),
// and every one of its steps holds the turn too, so the loop's state has
// one owner at a time.

// maxInlineSteps bounds the steps a proposer does for its proposal; a
// proposal still unanswered after them (raft holding it back, say) is
// left to the loop.
const maxInlineSteps = 8

// takeTurn does the loop's work on the caller's goroutine until none is
// left (p answered), if the turn is free. It reports false if the loop must be
// woken: the turn was taken, or work is left (p's included).
func (g *Group) takeTurn(p *proposal) (took bool) {
	if !g.turn.TryLock() {
		return false
	}
	defer g.turn.Unlock()
	if g.exited || g.stepErr != nil {
		return false
	}
	g.inTurn = true
	g.stats.inlineTurns.Add(1)
	defer func() {
		g.inTurn = false
		if r := recover(); r != nil {
			// The loop stops with it, as if the panic had been its own.
			g.stepErr = fmt.Errorf("panic in raft loop (a proposer's turn): %v\n%s", r, debug.Stack())
			took = false
			return
		}
		took = took && len(p.done) > 0 && !g.busy() && g.in.empty()
	}()
	for range maxInlineSteps {
		if err := g.step(); err != nil {
			g.stepErr = err
			return false
		}
		if !g.busy() && g.in.empty() {
			break
		}
	}
	return true
}
