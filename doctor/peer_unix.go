//go:build unix

package doctor

import (
	"os"

	"golang.org/x/sys/unix"
)

// fcntlTryLock opens path anew and tries a POSIX write lock on the whole
// file without waiting. A granted lock is held until the returned file is
// closed.
//
// A classic F_SETLK lock belongs to the process, and a process never
// conflicts with itself, so a peer inside the doctor's own process uses an
// open-file-description lock (F_OFD_SETLK, Linux) where there is one: the
// same byte-range lock, with an owner per description like flock's. Where
// there is none, it uses F_SETLK, whose owner (the process) still differs
// from the owner of a flock lock (the description).
func fcntlTryLock(path string, inProcess bool) (f *os.File, granted bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false, err
	}
	cmd := unix.F_SETLK
	if inProcess && ofdSetlk != 0 {
		cmd = ofdSetlk
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	for {
		err = unix.FcntlFlock(f.Fd(), cmd, &lk)
		if err != unix.EINTR {
			break
		}
	}
	switch err {
	case nil:
		return f, true, nil
	case unix.EAGAIN, unix.EACCES:
		f.Close()
		return nil, false, nil
	}
	f.Close()
	return nil, false, &os.PathError{Op: "fcntl F_SETLK", Path: path, Err: err}
}
