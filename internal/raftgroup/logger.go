package raftgroup

import (
	"context"
	"fmt"
	"log/slog"

	"go.etcd.io/raft/v3"
)

// raftLogger adapts etcd raft's Logger to slog. Raft logs elections and
// membership changes at Info, which is worth keeping; Fatal and Panic
// mean a broken invariant, so both log and panic, and the loop turns the
// panic into a fatal error for the group.
type raftLogger struct{ l *slog.Logger }

var _ raft.Logger = raftLogger{}

func newRaftLogger(l *slog.Logger) raftLogger { return raftLogger{l.With("component", "raft")} }

func (r raftLogger) on(level slog.Level) bool { return r.l.Enabled(context.Background(), level) }

func (r raftLogger) Debug(v ...any) {
	if r.on(slog.LevelDebug) {
		r.l.Debug(fmt.Sprint(v...))
	}
}

func (r raftLogger) Debugf(f string, v ...any) {
	if r.on(slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(f, v...))
	}
}

func (r raftLogger) Info(v ...any) {
	if r.on(slog.LevelInfo) {
		r.l.Info(fmt.Sprint(v...))
	}
}

func (r raftLogger) Infof(f string, v ...any) {
	if r.on(slog.LevelInfo) {
		r.l.Info(fmt.Sprintf(f, v...))
	}
}

func (r raftLogger) Warning(v ...any) {
	if r.on(slog.LevelWarn) {
		r.l.Warn(fmt.Sprint(v...))
	}
}

func (r raftLogger) Warningf(f string, v ...any) {
	if r.on(slog.LevelWarn) {
		r.l.Warn(fmt.Sprintf(f, v...))
	}
}

func (r raftLogger) Error(v ...any)            { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any) { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)            { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any) { r.Panicf(f, v...) }

func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	panic(s)
}

func (r raftLogger) Panicf(f string, v ...any) {
	s := fmt.Sprintf(f, v...)
	r.l.Error(s)
	panic(s)
}
