//go:build unix

package hold

import (
	"os"

	"github.com/hold-dev/hold/internal/nameddir"

	"golang.org/x/sys/unix"
)

// checkPrivateDir refuses a named-lock directory that is not this user's
// alone (the rule is nameddir.CheckPrivate's).
func checkPrivateDir(dir string) error { return nameddir.CheckPrivate(dir) }

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
