package dirlock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// What the protocol may delete is decided here, and nowhere else. A lock
// path is provably a lock, or a lock's leftover, when it is:
//
//   - an empty directory (proper-lockfile's lock, or one of ours between
//     mkdir and stamp);
//   - a directory holding only an owner record (owner.json that is empty,
//     as a crash between its creation and its write leaves it, or a lock
//     record: lock.IsLockRecord);
//   - an empty plain file, or one holding a lock record (a leftover of a
//     tool that locked with an O_EXCL file of the same name).
//
// Anything else there (a directory of photos, a data file, a symlink, a
// FIFO) is the user's: it is never deleted, never waited on, and every
// attempt to lock it fails at once with lock.ErrForeign. The content is
// judged before a reclaim moves anything aside, and again, on what was
// moved, before anything is deleted (removeIfSame).

// A semaphore (semaphore.go) is a directory at the lock path that holds
// the file SemaphoreFile: the slots' locks, each a lock directory by the
// rules above, and the semaphore's own files are inside it. It is not a
// lock: judged as one, it is foreign (errSemaphoreHere), which a plain
// acquisition takes as its cue to ask for the slot of a semaphore of one.
// It is never deleted. Its entries are:
//
//   - SemaphoreFile: the number of slots its last holder asked for, in
//     decimal (semaphoreSlots), and "SemaphoreFile.tmp-*" while it is
//     replaced;
//   - "slot-I-of-N": the lock of slot I of a semaphore of N slots (slotName),
//     with its reclaim guard "slot-I-of-N.recover" and its tombs
//     "slot-I-of-N.rm-*" beside it;
//   - "fence.K": the token counter, K being the last token handed out;
//   - "slots.gate.queue" (Linux; "slots.gate.q" on other unix systems,
//     "slots.gate" on Windows): the waiting gate.

// SemaphoreFile names the file that makes a directory at a lock path a
// semaphore, and records its number of slots.
const SemaphoreFile = "semaphore"

// errSemaphoreHere is what a plain lock's judgement makes of a semaphore
// at the lock path: not a lock (it matches lock.ErrForeign), and for an
// acquisition, the cue to take it as a semaphore of one.
var errSemaphoreHere error = semaphoreHere{}

type semaphoreHere struct{}

func (semaphoreHere) Error() string        { return "a semaphore is at the lock path" }
func (semaphoreHere) Is(target error) bool { return target == lock.ErrForeign }

// semaphoreWhy starts foreignDir's answer for a semaphore's directory.
const semaphoreWhy = "a semaphore"

// semaphoreSlots reports whether the directory at path is a semaphore, and
// the number of slots its record holds (0 when it cannot be read).
func semaphoreSlots(path string) (n int, ok bool) {
	b, err := readSmallFile(filepath.Join(path, SemaphoreFile), 32)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return 0, false
		}
		// There, but unreadable: a semaphore whose number is unknown.
		_, serr := lstat(filepath.Join(path, SemaphoreFile))
		return 0, serr == nil
	}
	n, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return 0, true
	}
	return n, true
}

// semaphoreRecord is what SemaphoreFile holds for n slots.
func semaphoreRecord(n int) []byte { return []byte(strconv.Itoa(n) + "\n") }

// maxEntries bounds how much of a directory is listed to judge it: a lock
// directory holds at most its owner record.
const maxEntries = 8

// foreignContent returns why what is at path (fi its Lstat) is not a lock,
// or "" when it is one (see above). err reports a look that failed; a path
// that cannot be examined is not judged foreign on that alone.
func foreignContent(path string, fi os.FileInfo) (why string, err error) {
	switch {
	case fi.IsDir():
		return foreignDir(path)
	case !fi.Mode().IsRegular():
		return "a " + kindOf(fi.Mode()) + " is at the lock path", nil
	}
	b, err := readSmallFile(path, lock.MaxRecordSize+1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isResourceError(err) {
			return "", err
		}
		return "a file hold cannot read is at the lock path", nil
	}
	if len(b) == 0 || lock.IsLockRecord(b) {
		return "", nil
	}
	return fmt.Sprintf("a file of %d bytes that is not a lock record is at the lock path", fi.Size()), nil
}

// badRecord is foreignDir's answer for a directory that holds nothing but
// an owner.json that is not a lock record. On a network or FUSE filesystem
// a reader can see a record half written, or through a stale cache, for a
// moment: the judgement waits such a directory out while its heartbeat is
// young, and calls it foreign only once it is old (judge).
const badRecord = "the directory's " + OwnerFile + " is not a lock record"

// foreignDir is foreignContent for a directory.
func foreignDir(path string) (string, error) {
	if n, ok := semaphoreSlots(path); ok {
		return fmt.Sprintf("%s of %d slots is at the lock path", semaphoreWhy, n), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	names, err := f.Readdirnames(maxEntries)
	f.Close()
	if err != nil && len(names) == 0 {
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		return "", err
	}
	var others []string
	for _, n := range names {
		if isSillyRename(n) {
			continue
		}
		if n != OwnerFile {
			others = append(others, n)
			continue
		}
		b, err := readSmallFile(filepath.Join(path, n), lock.MaxRecordSize+1)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // withdrawn meanwhile
			}
			return "", err
		}
		if len(b) > 0 && !lock.IsLockRecord(b) {
			return badRecord, nil
		}
	}
	if len(others) == 0 {
		return "", nil
	}
	more := ""
	if len(names) == maxEntries {
		more = ", …"
	}
	return fmt.Sprintf("the directory holds files that are not a lock's (%s%s)", strings.Join(quoteAll(others), ", "), more), nil
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return q
}

// foreignError is the error for a lock path holding what is not a lock.
func foreignError(op, path, why string) error {
	if strings.HasPrefix(why, semaphoreWhy) {
		return &lock.Error{Op: op, Path: path, Err: errSemaphoreHere,
			Hint: why + ", not a plain lock: ask for one of its slots with the same number of slots (hold run --slots N, hold.Slots)"}
	}
	return &lock.Error{Op: op, Path: path, Err: lock.ErrForeign,
		Hint: why + "; hold never deletes or waits on such a thing. Choose another lock path (another target, --lock-file or --name), or move it away if it is yours to move"}
}

// isSillyRename reports the name a network or FUSE filesystem gives a file
// that was deleted while still open (NFS's .nfsXXXX, libfuse's
// .fuse_hiddenXXXX, Samba's .smbdeleteXXXX): inside a lock directory that
// is an owner record a reader still had open when its holder removed it.
// It is hold's own, and the filesystem removes it once the reader closes.
func isSillyRename(name string) bool {
	return strings.HasPrefix(name, ".nfs") || strings.HasPrefix(name, ".fuse_hidden") || strings.HasPrefix(name, ".smbdelete")
}

// The kernel protocol refuses to flock a lock directory of ours (IsLockDir).
func init() { flock.SetPortableLockCheck(IsLockDir) }

// IsLockDir reports whether the directory at path is a lock of this
// protocol's by the rule above: it holds an owner record and nothing else,
// or it is empty and its name ends in ".lock", as proper-lockfile makes
// its locks; or it is a semaphore, whose slots are such locks. The
// kernel protocol asks before it flocks a directory (as
// flock(1) does): such a lock is held by its existence, so a kernel lock
// on it would not exclude its holder.
func IsLockDir(path string) bool {
	if _, ok := semaphoreSlots(path); ok {
		// A semaphore's slots are held by their directories too.
		return true
	}
	if why, err := foreignDir(path); err != nil || why != "" {
		return false
	}
	if strings.HasSuffix(filepath.Clean(path), ".lock") {
		return true
	}
	_, err := os.Lstat(filepath.Join(path, OwnerFile))
	return err == nil
}
