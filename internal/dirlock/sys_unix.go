//go:build unix

package dirlock

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// openNoFollow opens a file for reading without following a symlink in
// its last component: an owner record is read by everyone who judges the
// lock, and a symlink planted there must not make them read (or block on)
// a file of someone else's choosing. O_NONBLOCK keeps a planted FIFO from
// hanging the reader.
func openNoFollow(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// dirRef is a lock directory this process created, held open for as long
// as the lock is held. Through the open descriptor the owner record is
// written into exactly the directory we created (never into a successor's
// at the same path), the heartbeat touches exactly that inode, and, while
// the descriptor is open, the inode number cannot be reused by a directory
// created at the path after ours is removed, so identity comparisons with
// it are conclusive.
type dirRef struct {
	f  *os.File
	fi os.FileInfo
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
// another holder's lock.
func (d *dirRef) createOwner(b []byte) error {
	fd, err := unix.Openat(int(d.f.Fd()), OwnerFile, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: d.f.Name() + "/" + OwnerFile, Err: err}
	}
	f := os.NewFile(uintptr(fd), OwnerFile)
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// withdrawOwner removes the owner record from our directory, wherever it
// now is: through the descriptor, never through the path (which may hold
// another holder's lock by now).
func (d *dirRef) withdrawOwner() { unix.Unlinkat(int(d.f.Fd()), OwnerFile, 0) }

// touch sets our directory's mtime (the heartbeat) through the descriptor.
func (d *dirRef) touch(t time.Time) error {
	return touchFd(int(d.f.Fd()), t)
}

func (d *dirRef) close() { d.f.Close() }

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
