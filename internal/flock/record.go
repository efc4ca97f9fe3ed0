package flock

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/hold-dev/hold/internal/core"
	"github.com/hold-dev/hold/internal/proc"
)

// The lock file holds one owner record: a line of JSON, padded with spaces
// when a shorter record replaces a longer one. Replacing it costs one
// pwrite at offset 0 and no ftruncate (measured here, a truncate-and-write
// of the record doubled the cost of an acquisition). The fencing token is
// the record's "fence" field: each exclusive holder reads the previous
// value and writes the next.

// readSize is how much of the lock file a reader looks at first; a record
// is normally a few hundred bytes.
const readSize = 4096

// readRecord reads the record in f. It returns the raw size of the file
// content it saw and the decoded record (nil when missing or corrupt).
func readRecord(f *os.File) (size int64, rec *core.Owner) {
	buf := make([]byte, readSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return 0, nil
	}
	if n == readSize {
		// A large record, or a file that is not ours: look further, but
		// never past MaxRecordSize.
		fi, err := f.Stat()
		if err != nil || fi.Size() > core.MaxRecordSize {
			if err == nil {
				return fi.Size(), nil
			}
			return int64(n), nil
		}
		buf = make([]byte, fi.Size())
		n, err = f.ReadAt(buf, 0)
		if err != nil && err != io.EOF {
			return int64(n), nil
		}
	}
	rec, _ = core.Decode(buf[:n])
	return int64(n), rec
}

// publish stamps the owner record and, for an exclusive hold, the next
// fencing token. On a lock file this process may not write (another user's)
// the lock still works: the record is left out and the fence is zero,
// meaning "no token".
func (h *handle) publish(writable bool) error {
	size, prev := readRecord(h.f)
	var last uint64
	switch {
	case prev != nil:
		last = prev.Fence
	case size > 0:
		// The file holds something we cannot read, so the last token is
		// unknown. The clock in microseconds is above any count a lock
		// could reach by incrementing, so tokens still only go up.
		last = uint64(time.Now().UnixMicro())
	}
	if h.owner.Shared || !writable {
		if h.owner.Shared {
			h.owner.Fence = last
		}
		return nil
	}
	h.owner.Fence = last + 1
	b := h.owner.Encode()
	if int64(len(b)) < size && size <= core.MaxRecordSize {
		// Overwrite all of the old record: pad before the final newline.
		b = append(b[:len(b)-1], strings.Repeat(" ", int(size)-len(b))...)
		b = append(b, '\n')
	}
	if _, err := h.f.WriteAt(b, 0); err != nil {
		return &core.Error{Op: "write owner record", Path: h.path, Err: err}
	}
	if size > int64(len(b)) {
		// Only after a huge or foreign file: cut it down to our record.
		if err := h.f.Truncate(int64(len(b))); err != nil {
			return &core.Error{Op: "write owner record", Path: h.path, Err: err}
		}
	}
	return nil
}

// holderOf describes who holds the lock that f could not take: the record
// in the file, whether the recorded process is alive and, on Linux, which
// pids the kernel says hold it. Reading /proc/locks was measured here at
// ~5 ms after an idle spell, too slow for the error of a wait that has just
// timed out, so unless thorough is set it is read only when the record does
// not explain the lock (no record, or a recorded holder that is not alive).
func holderOf(f *os.File, thorough bool) *core.Holder {
	_, rec := readRecord(f)
	h := &core.Holder{Owner: rec, Alive: proc.Judge(rec)}
	if !thorough && h.Alive == core.Alive {
		return h
	}
	if pids := proc.LockHolders(f.Fd()); len(pids) > 0 {
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

// holderAt is holderOf for a path, for when the waiting descriptor has
// been given away. Nil when the file cannot be opened.
func holderAt(path string) *core.Holder {
	f, err := openForInspect(path)
	if err != nil {
		return nil
	}
	defer f.Close()
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
	defer f.Close()
	h := holderOf(f, true)
	if h.Owner != nil {
		st.Fence = h.Owner.Fence
	}
	switch probe(f) {
	case core.Free:
		if h.Owner != nil {
			st.Holder = &core.Holder{Owner: h.Owner, Alive: h.Alive}
		}
	case core.HeldShared:
		st.State = core.HeldShared
		st.Holder = h
	default:
		st.State = core.HeldExclusive
		st.Holder = h
	}
	return st, nil
}

// probe tells free, shared or exclusive with non-blocking locks, taking
// the least disruptive one first: a shared probe does not disturb shared
// holders, and it fails only under an exclusive holder.
func probe(f *os.File) core.State {
	if err := lockFile(f, true, false); err != nil {
		return core.HeldExclusive
	}
	unlockFile(f)
	if err := lockFile(f, false, false); err != nil {
		return core.HeldShared
	}
	unlockFile(f)
	return core.Free
}
