package flock

import (
	"bytes"
	"math"
	"os"
	"time"

	"github.com/hold-dev/hold/internal/core"
	"github.com/hold-dev/hold/internal/proc"
)

// The lock file holds one owner record: a line of JSON, padded with spaces
// when a slightly shorter record replaces a longer one. Replacing it costs
// one pwrite at offset 0 and, normally, no ftruncate (measured here, a
// truncate-and-write of the record doubled the cost of an acquisition).
// The fencing token is the record's "fence" field: each exclusive holder
// reads the previous value and writes the next.

// readSize is how much of the lock file a reader looks at first; a record
// is normally a few hundred bytes.
const readSize = 2048

// padSlack is how much longer than the new record an old one may be and
// still be overwritten by padding rather than cut off with ftruncate.
const padSlack = 256

// readRecord reads the record in f. It returns the size of the file
// content it saw and the raw record, which aliases buf when it fits
// there. A file larger than core.MaxRecordSize is not read at all (a nil
// record with its size): it is corrupt by definition.
func readRecord(f *lockFile, buf []byte) (size int64, raw []byte, err error) {
	// One pread: a short read of a regular file is its end, and the
	// record is normally a few hundred bytes. (readAt would ask again to
	// be told so.)
	n, err := f.readOnce(buf, 0)
	if err != nil {
		return 0, nil, err
	}
	if n < len(buf) {
		return int64(n), buf[:n], nil
	}
	// A large record, or a file that is not ours: look further, but
	// never past MaxRecordSize.
	size, err = f.size()
	if err != nil {
		return 0, nil, err
	}
	if size > core.MaxRecordSize {
		return size, nil, nil
	}
	big := make([]byte, size+1)
	n, err = f.readAt(big, 0)
	if err != nil {
		return 0, nil, err
	}
	if n > core.MaxRecordSize {
		// It grew meanwhile (a writer not holding the lock).
		return int64(n), nil, nil
	}
	return int64(n), big[:n], nil
}

// lastFence returns the fencing token to continue from, given what the
// lock file holds. For a file hold wrote it is the recorded token. An
// empty file has none (0). A file whose record is unreadable, or that has
// a record without a token (another tool's), may have had any token
// before: then the clock in microseconds stands in. No lock is taken a
// million times a second, so a count that started at 1, or at an earlier
// reading of the clock, is always below it — provided the wall clock is
// not set back. That keeps tokens strictly increasing even across a lock
// file that someone overwrote or that a crash left half-written.
func lastFence(size int64, raw []byte) uint64 {
	if size == 0 {
		return 0
	}
	if fence, ok := core.DecodeFence(raw); ok && fence != 0 {
		return fence
	}
	return uint64(time.Now().UnixMicro())
}

// publish stamps the owner record and, for an exclusive hold, the next
// fencing token. On a lock file this process may not write (another user's)
// the lock still works: the record is left out and the fence is zero,
// meaning "no token".
func (h *handle) publish(writable bool) error {
	if h.owner.Shared && !writable {
		// Nothing to write, and a reader's token is only informative:
		// spare the read too.
		return nil
	}
	var buf [readSize]byte
	size, raw, err := readRecord(h.f, buf[:])
	if err != nil {
		return &core.Error{Op: "read owner record", Path: h.path, Err: err}
	}
	last := lastFence(size, raw)
	if h.owner.Shared {
		h.owner.Fence = last
		return nil
	}
	if !writable {
		return nil
	}
	if last == math.MaxUint64 {
		// Only a forged record gets here; wrapping to 0 would break the
		// order worse than repeating the largest token does.
		last--
	}
	h.owner.Fence = last + 1
	b := h.owner.AppendEncode(buf[:0])
	flagAt := int64(bytes.Index(b[:min(len(b), 64)], []byte(releasedFalse)))
	pad := size - int64(len(b))
	if pad > 0 && pad <= padSlack {
		// Overwrite all of the old record: pad before the final newline.
		b = b[:len(b)-1]
		for range pad {
			b = append(b, ' ')
		}
		b = append(b, '\n')
	}
	if err := h.f.writeAt(b, 0); err != nil {
		return &core.Error{Op: "write owner record", Path: h.path, Err: err}
	}
	if flagAt >= 0 {
		// Only now: marking a record we failed to write would damage
		// the previous holder's.
		h.releasedAt = flagAt + int64(len(releasedFalse)-len("false"))
	}
	if size > int64(len(b)) {
		// After a much longer record, a foreign or a huge file: cut it
		// down to ours.
		if err := h.f.truncate(int64(len(b))); err != nil {
			return &core.Error{Op: "write owner record", Path: h.path, Err: err}
		}
	}
	return nil
}

// releasedFalse is how an unreleased record says so; markReleased
// overwrites its "false" with "true " (the same length: the space is
// JSON whitespace).
const releasedFalse = `,"released":false`

// markReleased flags the record this holder wrote as a leftover, so that
// whoever reads it while the lock is held by another (one that writes no
// record, or has not written it yet) does not name this process as the
// holder. Best effort: the record is only diagnostics.
func (h *handle) markReleased() {
	if h.releasedAt > 0 {
		h.f.writeAt([]byte("true "), h.releasedAt)
	}
}

// holderOf describes who holds the lock that f could not take: the record
// in the file, whether the recorded process is alive and, on Linux, which
// pids the kernel says hold it. Reading /proc/locks was measured here at
// 5-15 ms after an idle spell (80 µs when warm), too slow for the error of
// a wait that has just timed out, so unless thorough is set it is read only
// when the record does not explain the lock (no record, or a recorded
// holder that is not alive).
func holderOf(f *lockFile, thorough bool) *core.Holder {
	rec := readOwner(f)
	leftover := rec != nil && rec.Released
	h := &core.Holder{Owner: rec, Alive: proc.Judge(rec)}
	if !thorough && h.Alive == core.Alive && !leftover {
		return h
	}
	if leftover {
		// The record names a past holder: say nothing rather than
		// something false, unless the kernel knows better below.
		h.Owner, h.Alive = nil, core.LivenessUnknown
	}
	if pids := proc.LockHolders(f.procFd()); len(pids) > 0 {
		h.PIDs = pids
		h.Commands = make(map[int]string, len(pids))
		for _, pid := range pids {
			if c := proc.Cmdline(pid); c != "" {
				h.Commands[pid] = c
			}
		}
	}
	return h
}

// readOwner reads and decodes the record in f; nil when there is none
// or it cannot be read.
func readOwner(f *lockFile) *core.Owner {
	var buf [readSize]byte
	if _, raw, err := readRecord(f, buf[:]); err == nil && raw != nil {
		rec, _ := core.Decode(raw)
		return rec
	}
	return nil
}

// holderAt is holderOf for a path, for when the waiting descriptor has
// been given away. Nil when the file cannot be opened.
func holderAt(path string) *core.Holder {
	f, err := openForInspect(path)
	if err != nil {
		return nil
	}
	defer f.close()
	return holderOf(f, false)
}

// Inspect reports the state of the lock at path without creating the file.
// Whether the lock is held is decided by the kernel (non-blocking probes),
// never by the recorded pid: a dead recorded holder whose descriptor lives
// on in a child still holds the lock.
func (Protocol) Inspect(path string) (*core.Status, error) {
	st := &core.Status{Path: path, Protocol: "flock"}
	f, err := openForInspect(path)
	if err != nil {
		if os.IsNotExist(err) {
			return st, nil
		}
		return nil, err
	}
	defer f.close()
	state := probe(f)
	rec := readOwner(f)
	if rec != nil {
		st.Fence = rec.Fence
	}
	if state == core.Free {
		if rec != nil {
			// The last holder, for the record.
			st.Holder = &core.Holder{Owner: rec, Alive: proc.Judge(rec)}
		}
		return st, nil
	}
	st.State = state
	st.Holder = holderOf(f, true)
	return st, nil
}

// probe tells free, shared or exclusive with non-blocking locks, taking
// the least disruptive one first: a shared probe does not disturb shared
// holders, and it fails only under an exclusive holder. (For the instant a
// probe holds the lock, a TryAcquire elsewhere may find it busy.)
func probe(f *lockFile) core.State {
	if err := f.lock(true, false); err != nil {
		return core.HeldExclusive
	}
	f.unlock()
	if err := f.lock(false, false); err != nil {
		return core.HeldShared
	}
	f.unlock()
	return core.Free
}
