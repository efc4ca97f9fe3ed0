package dirlock

import (
	"bytes"
	"os"
	"strconv"

	"github.com/hold-dev/hold/internal/randname"
	"github.com/hold-dev/hold/lock"
)

// A lock path used by more than one protocol, one after the other: the
// kernel protocol leaves its lock file behind with a past record (the
// last fencing token, "released": true) when it lets go. That file is not
// a leftover of a crash to be aged out but a lock released on purpose, so
// the portable protocol takes it at once, provided no kernel lock is held
// on it (judgeFile asks the kernel first; the reclaim takes that kernel
// lock itself and removes the file while it holds it, see reclaimFile).
// The fencing token continues from the record's, and a portable holder
// that continued one leaves a past record of its own when it releases, so
// that the next holder, of either protocol, continues from it in turn. A
// path only ever used by this protocol keeps no record and token 0, as
// proper-lockfile expects.

// releasedRecord reports whether the plain file at path holds a released
// record, and its fence.
func releasedRecord(path string) (fence uint64, ok bool) {
	b, err := readSmallFile(path, lock.MaxRecordSize+1)
	if err != nil {
		return 0, false
	}
	b = bytes.TrimRight(b, " \n")
	if !lock.IsRecord(b) || !lock.IsPastRecord(b) {
		return 0, false
	}
	return lock.DecodeFence(b)
}

// fileOwner decodes the record of hold's kernel protocol in the plain
// file at path; nil when it holds none.
func fileOwner(path string) *lock.Owner {
	b, err := readSmallFile(path, lock.MaxRecordSize+1)
	if err != nil {
		return nil
	}
	if b = bytes.TrimRight(b, " \n"); !lock.IsRecord(b) {
		return nil
	}
	o, ok := lock.DecodeOwner(b)
	if !ok || o.PID <= 0 {
		return nil
	}
	return o
}

// releasedWhy says what a judgement found in a released record.
func releasedWhy(fence uint64) string {
	return "a lock released by another protocol (token " + strconv.FormatUint(fence, 10) + ") at the lock path"
}

// leavePastRecord puts a past record with this holder's token at the
// lock path, which its release has just emptied, if the holder continued
// a token. It is linked into place, which fails if anyone has taken the
// path meanwhile: their lock is never replaced. Best effort: without it
// the next holder starts its token afresh, as on a new path.
func (h *handle) leavePastRecord() {
	fence := h.owner.Fence
	if fence == 0 {
		// A file-form holder held no token, and hands on the one it
		// found (attempt.carry), so the next continues from it.
		fence = h.carry
	}
	if fence == 0 || h.slot >= 0 {
		// A semaphore's slot draws its tokens from the semaphore's
		// counter, which outlives every slot (semaphore.go).
		return
	}
	tmp := h.path + ".released-" + randname.Hex(6)
	if err := os.WriteFile(tmp, lock.AppendPastRecord(nil, fence, 0), 0o666); err != nil {
		return
	}
	os.Link(tmp, h.path)
	os.Remove(tmp)
}
