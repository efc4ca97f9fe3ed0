//go:build unix

package hold

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink or file was put there); remove it", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d): another user made it to capture or block your named locks; ask root to remove it", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %v); run chmod 700 on it", dir, fi.Mode().Perm())
	}
	return nil
}

// lockDirShared opens dir and takes a shared flock(2) on it, which keeps
// systemd-tmpfiles out of it while the file is open (see named_hold.go).
// It waits for a cleaner that is in the directory now, so that no lock
// file is opened while one is being removed. A directory that cannot be
// opened or locked gets nil: the lock is taken all the same.
func lockDirShared(dir string) *os.File {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil
	}
	return f
}
