package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"nacre/internal/client"
)

// Holes: put and get keep files sparse, as cp --sparse=auto does. A
// checkpoint or a VM image of mostly holes would otherwise cost its whole
// apparent size in OST space and bandwidth (put) or local disk (get).

// sparseBlock is the unit a run of zeros must fill to become a hole.
const sparseBlock = 64 << 10

var zeroBlock = make([]byte, sparseBlock)

// dataRuns calls fn for each run of p that is not all zeros, cut at
// sparseBlock boundaries of the file (off is p's offset in it).
func dataRuns(p []byte, off uint64, fn func(run []byte, off uint64) error) error {
	start := -1 // start of the current data run
	for i := 0; i < len(p); {
		end := min(len(p), i+int(sparseBlock-(off+uint64(i))%sparseBlock))
		zero := bytes.Equal(p[i:end], zeroBlock[:end-i])
		if !zero && start < 0 {
			start = i
		}
		if zero && start >= 0 {
			if err := fn(p[start:i], off+uint64(start)); err != nil {
				return err
			}
			start = -1
		}
		i = end
	}
	if start >= 0 {
		return fn(p[start:], off+uint64(start))
	}
	return nil
}

// copyIn writes src into the new, empty file f, leaving holes where src
// has runs of zeros, and returns the size written. A local regular file
// opened by name (local) is read by its data ranges: its holes are not
// even read. what names src in errors; p is told how far the copy is.
func copyIn(ctx context.Context, f *client.File, src io.Reader, local bool, what string, p *progress) (uint64, error) {
	buf := make([]byte, copyBuf)
	var size, end uint64 // end: just past the last byte written
	write := func(run []byte, off uint64) error {
		if _, err := f.WriteAt(ctx, run, off); err != nil {
			return &remoteError{err}
		}
		end = off + uint64(len(run))
		p.at(end)
		return nil
	}
	readErr := func(err error) error { return fmt.Errorf("read %s: %w", what, err) }
	src = ctxReader{ctx, src}
	if lf, ok := src.(ctxReader).r.(*os.File); ok && local {
		if st, err := lf.Stat(); err == nil && st.Mode().IsRegular() {
			var err error
			size, err = copyRanges(ctx, lf, buf, write)
			if err != nil {
				return 0, err
			}
			return size, finishSparse(ctx, f, size, end)
		}
	}
	for {
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			if err := dataRuns(buf[:n], size, write); err != nil {
				return 0, err
			}
			size += uint64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, err // interrupted (ctxReader)
		}
		if rerr != nil {
			return 0, readErr(rerr)
		}
	}
	return size, finishSparse(ctx, f, size, end)
}

// copyRanges reads the data ranges of the local regular file lf
// (SEEK_DATA and SEEK_HOLE; all of it where the file system cannot say)
// and passes their runs of data to write; it returns the file's size.
func copyRanges(ctx context.Context, lf *os.File, buf []byte, write func([]byte, uint64) error) (uint64, error) {
	readErr := func(err error) error { return fmt.Errorf("read %s: %w", lf.Name(), unwrapPath(err)) }
	var off int64
	for whole := false; !whole; {
		data, err := lf.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break // no data after off
		}
		hole := int64(-1) // read to the end
		if err != nil {
			data, whole = off, true // no SEEK_DATA here: read everything
		} else if hole, err = lf.Seek(data, seekHole); err != nil {
			hole, whole = -1, true
		}
		for pos := data; hole < 0 || pos < hole; {
			want := len(buf)
			if hole >= 0 {
				want = int(min(int64(want), hole-pos))
			}
			n, rerr := lf.ReadAt(buf[:want], pos)
			if n > 0 {
				if err := dataRuns(buf[:n], uint64(pos), write); err != nil {
					return 0, err
				}
				pos += int64(n)
			}
			if rerr == io.EOF || (rerr == nil && n == 0) {
				hole = pos
				break
			}
			if rerr != nil {
				return 0, readErr(rerr)
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		off = hole
	}
	// The size now, as a copy that read to the end would see it.
	end, err := lf.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, readErr(err)
	}
	return uint64(max(end, off)), nil
}

// finishSparse gives f its size where the copy ended in a hole.
func finishSparse(ctx context.Context, f *client.File, size, end uint64) error {
	if end >= size {
		return nil
	}
	if err := f.Truncate(ctx, size); err != nil {
		return &remoteError{err}
	}
	return nil
}

// remoteError is a failure of the Nacre side of a copy (not of reading
// the local source).
type remoteError struct{ err error }

func (e *remoteError) Error() string { return e.err.Error() }
func (e *remoteError) Unwrap() error { return e.err }

// Whence values of lseek(2) that package io does not name.
const (
	seekData = 3
	seekHole = 4
)

// sparseFile writes a new local file, seeking over blocks of zeros
// instead of writing them (get); finish gives it its size.
type sparseFile struct {
	f    *os.File
	off  uint64
	size uint64 // just past the last byte written
}

func (s *sparseFile) Write(p []byte) (int, error) {
	err := dataRuns(p, s.off, func(run []byte, off uint64) error {
		if _, err := s.f.WriteAt(run, int64(off)); err != nil {
			return err
		}
		s.size = off + uint64(len(run))
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.off += uint64(len(p))
	return len(p), nil
}

// finish extends the file over a trailing run of zeros.
func (s *sparseFile) finish() error {
	if s.size >= s.off {
		return nil
	}
	return s.f.Truncate(int64(s.off))
}

// ctxReader is a Reader whose reads return once ctx is done, also while
// the one below still waits (standard input or a FIFO with no writer
// yet): an interrupted put must not wait for input to end.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.r.Read(p)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-c.ctx.Done():
		// The read may still fill p: the caller is giving up on it.
		return 0, c.ctx.Err()
	}
}
