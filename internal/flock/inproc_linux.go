package flock

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// inProcessFlags is how a client opens a lock file for an in-process
// hold: as openLockFile opens an existing one (never creating it).
const inProcessFlags = unix.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY

// RecipeFor returns the recipe for the lock file f of a lock this process
// has just taken for a client, when such a lock may be taken in the
// client's process (see inproc.go): an exclusive kernel lock, not a slot
// of a semaphore, whose record is not written yet and whose first token
// continues no other file's (FenceAbove), on a lock file of hold's (one
// link, this user's, writable), empty or holding a past record, unchanged
// since it was verified. ok is false otherwise. The record it carries is this lock's, naming client (its
// pid, host, start time and command line) instead of this process, when
// client is not nil.
func RecipeFor(f *os.File, client *lock.Owner) (r *Recipe, ok bool) {
	if f == nil {
		return nil, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, false
	}
	var fi fileInfo
	var ferr error
	if rc.Control(func(fd uintptr) { fi, ferr = fileType(int(fd)) }) != nil || ferr != nil || fi.mode != unix.S_IFREG {
		return nil, false
	}
	lazy.mu.Lock()
	h := lazy.m[fi.id]
	lazy.mu.Unlock()
	if h == nil || h.f.file() != f {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.published, h.released, !h.listed, h.owner.Shared, !h.writable, h.tokenErr != nil,
		h.fenceFloor != 0, h.fenceAbove != "", h.discard, h.lost.Marked():
		return nil, false
	case fi.links != 1, h.f.links != 1, h.f.dir, h.f.otherUsers(), h.f.changed != fi.changed, !verified.has(h.f):
		return nil, false
	}
	o := h.owner
	o.Fence, o.ID = 0, ""
	if client != nil {
		o.PID, o.Host, o.ProcStart, o.Command = client.PID, client.Host, client.ProcStart, client.Command
	}
	return &Recipe{Path: h.path, Flags: inProcessFlags, File: File{fi.id.dev, fi.id.ino},
		Ctime: fi.changed.ctime, Size: fi.changed.size, RecordDelay: int64(recordDelay), LazyTick: int64(lazyTick),
		Ticket: o.AppendEncode(nil)}, true
}

// openHeld opens the lock file at path that a client holds in its own
// process, as id, for op: ErrLost when path no longer names it.
func openHeld(op, path string, id File) (*lockFile, error) {
	fd, err := openRetry(path, inProcessFlags, 0)
	if err == unix.ENOENT {
		return nil, &lock.Error{Op: op, Path: path, Err: lock.ErrLost, Hint: lostWhy}
	}
	if err != nil {
		return nil, openError(path, err)
	}
	fi, err := checkRegular(fd, path, false)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := &lockFile{fd: fd, path: path, id: fi.id, links: fi.links, uid: fi.uid, changed: fi.changed}
	if f.id != (fileKey{id.Dev, id.Ino}) {
		f.close()
		return nil, &lock.Error{Op: op, Path: path, Err: lock.ErrLost, Hint: lostWhy}
	}
	return f, nil
}

// WriteRecord writes the owner record of a hold that a client took in
// its own process, with a recipe whose ticket is ticket, at startedAt,
// and that it keeps while this runs: into the file at path, if it still
// is the file id, with the next token, exactly as the library's own
// holder writes it (publishLocked).
func WriteRecord(path string, id File, ticket []byte, startedAt time.Time) (*Written, error) {
	o, ok := ticketOwner(ticket, startedAt)
	if !ok {
		return nil, &lock.Error{Op: "token", Path: path, Err: lock.ErrNoToken, Hint: "the recipe's ticket is not an owner record: take the lock through the agent"}
	}
	f, err := openHeld("token", path, id)
	if err != nil {
		return nil, err
	}
	defer f.close()
	if !proc.Keeps(o.PID, proc.FileKey{Dev: id.Dev, Ino: id.Ino}) {
		// A record names its holder to every other process, and a token
		// is what a holder's writes are fenced with: neither is handed to
		// a process that does not hold the lock (one that let go, or never
		// took it), whatever it says of itself.
		return nil, &lock.Error{Op: "token", Path: path, Err: lock.ErrNoToken,
			Hint: fmt.Sprintf("process %d, which the ticket names, does not hold this lock file: take the lock again", o.PID)}
	}
	h := &handle{f: f, path: path, owner: o, writable: true}
	h.mu.Lock()
	h.publishLocked()
	h.mu.Unlock()
	if h.tokenErr != nil {
		return nil, h.tokenErr
	}
	return &Written{Owner: h.owner, Record: h.record}, nil
}

// EraseRecord replaces the record (fence, record) that WriteRecord wrote for a client's
// in-process hold of the file id at path by a past record, as the
// library's own holder does before it lets go (erase): only while the
// file still holds that record exactly.
func EraseRecord(path string, id File, fence uint64, record []byte) error {
	f, err := openHeld("release", path, id)
	if err != nil {
		return err
	}
	defer f.close()
	h := &handle{f: f, path: path, owner: lock.Owner{Fence: fence}, recordLen: len(record), record: record}
	h.erase()
	return nil
}

// CheckHeld reports whether a client's in-process hold of the file id at
// path is lost: ErrLost when path no longer names it (the loss rule of
// the library's kernel locks, handle.Check and the watch).
func CheckHeld(path string, id File) error {
	got, err := pathID(path)
	if err != nil && err != unix.ENOENT {
		return nil // cannot tell: not a loss
	}
	if err != nil || got != (fileKey{id.Dev, id.Ino}) {
		return &lock.Error{Op: "check", Path: path, Err: lock.ErrLost, Hint: lostWhy}
	}
	return nil
}

// HeldIn reports whether path names one of files (by device and inode):
// whether a lock at path is one that a client holds in its own process.
func HeldIn(path string, files []File) bool {
	if len(files) == 0 {
		return false
	}
	got, err := pathID(path)
	if err != nil {
		return false
	}
	for _, f := range files {
		if got == (fileKey{f.Dev, f.Ino}) {
			return true
		}
	}
	return false
}
