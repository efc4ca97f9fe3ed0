//go:build unix

package dirlock

import (
	"errors"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// readSmallFile reads up to limit bytes of the file at path, without
// following a symlink in its last component: an owner record is read by
// everyone who judges the lock, and a symlink planted there must not make
// them read a file of someone else's choosing. O_NONBLOCK keeps a planted
// FIFO from hanging the reader (it reads as empty, or fails: unreadable).
// Plain system calls, not an *os.File: this runs on every read-back,
// release and judgement, and an *os.File costs two more calls (a flags
// query and a poller registration that fails for regular files).
func readSmallFile(path string, limit int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, min(limit, 1024))
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(limit, 2*cap(buf))-len(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):min(cap(buf), limit)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

// isStamp reports whether the owner record of the lock directory dir is
// stamp, byte for byte: ours. It answers what readRecord and a comparison
// would, without their allocations and usually in one read: it asks for
// one byte more than stamp, so a longer record shows as different at once,
// and a regular file's read returns all it has up to the size asked.
// Absence (ENOENT, ENOTDIR) is a fact: false with a nil error.
func isStamp(dir string, stamp []byte) (bool, error) {
	path := dir + "/" + OwnerFile
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return false, nil
		}
		return false, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var small [512]byte
	buf := small[:]
	if len(stamp)+1 > len(buf) {
		buf = make([]byte, len(stamp)+1)
	}
	buf = buf[:len(stamp)+1]
	n := 0
	for n < len(stamp) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n == len(stamp) && string(buf[:n]) == string(stamp), nil
}

// dirRef is a lock directory this process created, held open for as long
// as the lock is held. Through the open descriptor the owner record is
// written into exactly the directory we created (never into a successor's
// at the same path), the heartbeat touches exactly that inode, and, while
// the descriptor is open, the inode number cannot be reused by a directory
// created at the path after ours is removed, so identity comparisons with
// it are conclusive.
//
// In the file form (softfile.go) it is the lock file instead, held open
// for the same reasons: the inode cannot be reused while we hold it.
type dirRef struct {
	f  *os.File
	fi os.FileInfo
	// file: the file form's lock file, not a directory.
	file bool
}

func openDir(path string) (*dirRef, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dirRef{f: f, fi: fi}, nil
}

// identity is the (device, inode) of our directory, for os.SameFile.
func (d *dirRef) identity() os.FileInfo { return d.fi }

// createOwner writes the owner record exclusively (O_EXCL): our directory
// was empty when we made it, so a record already there means the directory
// is not the one we think, and overwriting it would put our token into
// another holder's lock. No fsync: the record matters only while its
// writer lives (a crash of the machine ends every holder, and a record
// lost with it leaves an ownerless lock, judged by age), and every reader
// reads through the same page cache.
func (d *dirRef) createOwner(b []byte) error {
	fd, err := unix.Openat(int(d.f.Fd()), OwnerFile, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: d.f.Name() + "/" + OwnerFile, Err: err}
	}
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "write", Path: d.f.Name() + "/" + OwnerFile, Err: err}
		}
		b = b[n:]
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: d.f.Name() + "/" + OwnerFile, Err: err}
	}
	return nil
}

// withdrawOwner removes the owner record from our directory, wherever it
// now is: through the descriptor, never through the path (which may hold
// another holder's lock by now). A lock file's record is overwritten,
// through the descriptor too, with filelock's released marker, which names
// no holder (a leftover, judged by age, by filelock and hold alike).
func (d *dirRef) withdrawOwner() {
	fd := int(d.f.Fd())
	if d.file {
		if _, err := unix.Pwrite(fd, []byte(filelockReleased), 0); err == nil {
			unix.Ftruncate(fd, int64(len(filelockReleased)))
		}
		return
	}
	unix.Unlinkat(fd, OwnerFile, 0)
}

// createFile makes the file form's lock file at path, exclusively, and
// writes b into it: the file is new, so nobody else's record is ever
// overwritten. A file it made and could not write is removed, if the
// path still names it: it is microseconds old, and nobody removes a lock
// file that young (an empty one is judged by age, never younger than
// Grace), so the path cannot name a successor's yet.
func createFile(path string, mode os.FileMode, b []byte) (*dirRef, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	for err == nil && len(b) > 0 {
		var n int
		n, err = unix.Write(fd, b)
		if err == unix.EINTR {
			err = nil
			continue
		}
		if err != nil {
			err = &os.PathError{Op: "write", Path: path, Err: err}
		}
		b = b[n:]
	}
	if err != nil {
		if fi != nil {
			if cur, lerr := lstat(path); lerr == nil && os.SameFile(cur, fi) {
				os.Remove(path)
			}
		}
		f.Close()
		return nil, err
	}
	return &dirRef{f: f, fi: fi, file: true}, nil
}

// touch sets our directory's mtime (the heartbeat) through the descriptor.
func (d *dirRef) touch(t time.Time) error {
	return touchFd(int(d.f.Fd()), t)
}

func (d *dirRef) close() { d.f.Close() }

// mtime is the lock's time stamp as the filesystem keeps it, read through
// our descriptor: the one object we hold, whatever the path names now.
func (d *dirRef) mtime() (time.Time, error) {
	fi, err := d.f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// isMkdirContention: on unix only EEXIST means someone else has the path.
// EACCES, EPERM, EROFS and ENOENT are real problems that waiting cannot
// cure, so they fail at once instead of turning into a timeout.
func isMkdirContention(err error) bool { return errors.Is(err, unix.EEXIST) }

// isRemoveContention: on unix no failure of rename or remove means that
// another process is merely passing through.
func isRemoveContention(err error) bool { return false }

// rmdir removes an empty directory with one call (os.Remove tries unlink
// first).
func rmdir(path string) error {
	if err := unix.Rmdir(path); err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// isNotEmpty reports the failure of rmdir on a directory that is not
// empty (POSIX allows EEXIST for it too).
func isNotEmpty(err error) bool {
	return errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)
}
