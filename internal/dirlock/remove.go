package dirlock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hold-dev/hold/internal/randname"
	"github.com/hold-dev/hold/lock"
)

// removal is what removeIfSame did.
type removal int

const (
	// removed: the judged object is gone from the path.
	removed removal = iota
	// changed: the path no longer held the judged object (it vanished, or
	// was replaced); nothing of anyone else's was deleted.
	changed
	// contended: the filesystem refused the move in a way that means
	// another process is touching the path (Windows); try again later.
	contended
)

// removeIfSame deletes what is at path only if it is still the object that
// was judged: the same (device, inode) as judged, carrying the same owner
// token. It is the one delete of the protocol, used by reclaim, release,
// guard eviction and Break.
//
// It first moves the object aside with one rename to a unique tomb name in
// the same directory, then checks the identity of what it moved, not of
// what it looked at earlier: a lock created at the path between the
// judgement and the rename is caught by the check and put back. A
// stat-compare-then-delete would leave a window between compare and
// delete; here the compared object is the deleted one. Releasing by rename
// also frees the lock path in one step, so a crash while cleaning up the
// tomb never wedges the lock (it leaves the tomb behind as litter).
//
// moved, when set, is called between the rename and the cleanup (a fault
// point for tests). kept, when set, is called once what was moved is
// proven to be the object judged and a lock, before it is deleted: the
// lock path is then known to be free of it (release acts on that, and on
// nothing sooner: what it moved may have been another holder's lock,
// which goes back).
func removeIfSame(path string, judged os.FileInfo, want expect, moved, kept func()) (removal, error) {
	tomb := path + ".rm-" + randname.Hex(6)
	if err := renameNoReplace(path, tomb); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return changed, nil
		}
		// Contention (Windows) or a real failure: either way nothing was
		// removed, and the caller reports the error it cannot retry away.
		return contended, err
	}
	if moved != nil {
		moved()
	}
	fi, err := lstat(tomb)
	same := err == nil && os.SameFile(fi, judged)
	if same && !fi.IsDir() && want.stamp != nil {
		// A file-form lock of ours (softfile.go): what was moved must
		// still hold our record, byte for byte. Unreadable: the identity,
		// which matched, decides.
		if ours, rerr := isFileStamp(tomb, want.stamp); rerr == nil {
			same = ours
		}
	}
	if same && fi.IsDir() {
		// The record of what we moved must be the one judged. If it
		// cannot be read at all, the identity, which matched, decides.
		if want.stamp != nil {
			if ours, rerr := isStamp(tomb, want.stamp); rerr == nil {
				same = ours
			}
		} else if raw, rerr := readRecord(tomb); rerr == nil {
			same = want.tokenIn(raw)
		}
	}
	if !same {
		// Not what we judged: someone's fresh lock. Put it back where it
		// was, unless the path has been taken again meanwhile; then its
		// holder's heartbeat finds the lock gone and reports it lost, and
		// the tomb is deleted only if it is a lock. A filelock holder has
		// no heartbeat and may be alive: its file stays, as litter.
		if err := renameNoReplace(tomb, path); err != nil {
			if fi, lerr := lstat(tomb); lerr == nil {
				if why, cerr := foreignContent(tomb, fi); why == "" && cerr == nil && !namesFilelockHolder(tomb, fi) {
					removeTomb(tomb, fi.IsDir())
				}
			}
		}
		return changed, nil
	}
	// What was moved is the object judged; its content is judged again
	// before anything is deleted: something may have been put into it
	// since.
	if why, err := foreignContent(tomb, fi); why != "" || err != nil {
		if why == "" {
			why = "its content could not be checked: " + err.Error()
		}
		return changed, putBack(path, tomb, why)
	}
	if kept != nil {
		kept()
	}
	if err := removeTomb(tomb, fi.IsDir()); err != nil && !isRemoveContention(err) {
		if errors.Is(err, errNotLock) {
			// Something arrived between the check and the delete.
			return removed, putBack(path, tomb, "files that are not a lock's arrived in it")
		}
		if errors.Is(err, errLitter) {
			// The lock path is free; the tomb goes once the reader of
			// the old record closes it.
			return removed, nil
		}
		// The lock path is free already; the tomb is litter, not a lock.
		return removed, err
	}
	return removed, nil
}

// putBack returns what a removal moved aside and then found not to be a
// lock to where it was. If the lock path has been taken again meanwhile,
// it stays at its tomb name, and the error says where.
func putBack(path, tomb, why string) error {
	if err := renameNoReplace(tomb, path); err != nil {
		return foreignError("remove", path, why+"; it was left, untouched, at "+tomb)
	}
	return foreignError("remove", path, why)
}

// expect is what the owner record of a judged lock must still be for it
// to be deleted: exactly the bytes we wrote (our own lock), or a record
// carrying token ("" for none: an ownerless lock or a guard).
type expect struct {
	token string
	stamp []byte
}

// tokenIn reports whether raw carries the expected token (an expect
// without a stamp; a stamp is compared by isStamp).
func (e expect) tokenIn(raw []byte) bool {
	var got string
	if raw != nil {
		if o, ok := lock.DecodeOwner(raw); ok {
			got = o.ID
		}
	}
	return got == e.token
}

// errNotLock reports a tomb that held more than a lock when it was to be
// deleted; errLitter one that keeps only an owner record a reader still
// has open (see isSillyRename), which the filesystem removes later.
var (
	errNotLock = errors.New("not a lock")
	errLitter  = errors.New("an owner record still open elsewhere keeps the moved-aside lock")
)

// Retries of rmdir while a silly-renamed record keeps a tomb: a reader
// holds the record for the few microseconds of one read.
const (
	litterRetries = 20
	litterPause   = 2 * time.Millisecond
)

// removeTomb deletes a moved-aside lock, already judged to be one: an
// owner record and the directory, two calls, or the plain file. It never
// deletes anything else: a directory that is not empty once its record is
// gone fails with errNotLock and stays.
func removeTomb(tomb string, isDir bool) error {
	if !isDir {
		if err := os.Remove(tomb); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	os.Remove(filepath.Join(tomb, OwnerFile))
	for try := 0; ; try++ {
		err := rmdir(tomb)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !isNotEmpty(err) {
			return err
		}
		switch why, _ := foreignDir(tomb); {
		case why != "":
			return errNotLock
		case try == litterRetries:
			return errLitter
		}
		time.Sleep(litterPause)
	}
}
