//go:build unix

package nameddir

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

// dir chooses the parent by fixed rules that every process of the user
// on this machine applies alike:
//
//   - On Linux, /run/lock when it is a sticky directory everyone may
//     write (Debian, Ubuntu: mode 1777). It is the system's place for lock
//     files: a tmpfs that lasts until reboot (a kernel lock does not
//     outlive a reboot either), no login session owns it, so logind's
//     cleanup at logout (which empties /run/user/UID and, with RemoveIPC,
//     the user's files in /dev/shm) never touches it, and no
//     systemd-tmpfiles rule ages it (its line in tmpfiles.d has no age).
//     PrivateTmp= services see the same /run/lock as everyone, where they
//     would have a /tmp and /var/tmp of their own.
//   - Otherwise (Fedora, Arch and openSUSE make /run/lock writable by
//     root or a group only; macOS and the BSDs have no such directory),
//     /var/tmp. It outlives logout and reboot; macOS's and the BSDs'
//     periodic cleaners leave it alone by default. systemd-tmpfiles ages
//     it (30 days), but skips every directory that it cannot lock with
//     flock(2) LOCK_EX|LOCK_NB, and a holder of a named lock keeps a
//     shared flock on its directory (hold.Named does), so a lock file is
//     never aged away while held. /tmp is not used: it is private to a
//     PrivateTmp= service, and aged sooner (10 days).
//
// The choice depends on /run/lock's mode, not on whether this process may
// write it (a service with ProtectSystem= sees it read-only but with the
// same mode): such a process fails with an error rather than quietly
// taking another directory's lock.
func dir() (string, error) {
	return filepath.Join(parent(), userDir()), nil
}

func parent() string {
	if runtime.GOOS == "linux" {
		if fi, err := os.Stat("/run/lock"); err == nil && fi.IsDir() &&
			fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm()&0o002 != 0 {
			return "/run/lock"
		}
	}
	return "/var/tmp"
}

// earlier lists $XDG_RUNTIME_DIR/hold and $TMPDIR/hold-UID, and with
// fixed also where those variables point when set by the system (logind's
// /run/user/UID) or unset (/tmp), so that a process without them (cron)
// still finds the holders a login shell's older hold made.
func earlier(fixed bool) []string {
	var dirs []string
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		dirs = append(dirs, filepath.Join(x, "hold"))
	}
	dirs = append(dirs, filepath.Join(os.TempDir(), userDir()))
	if fixed {
		if runtime.GOOS == "linux" {
			dirs = append(dirs, filepath.Join("/run/user", strconv.Itoa(os.Getuid()), "hold"))
		}
		dirs = append(dirs, filepath.Join("/tmp", userDir()))
	}
	return dirs
}

// CheckPrivate returns nil when dir may hold this user's named locks: a
// real directory (not a symlink), owned by this user, that nobody else may
// write. Otherwise its error says what is wrong and what to do. The
// parents of named-lock directories are writable by everyone, so anyone
// could have made dir to capture or block the user's locks.
func CheckPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return notPrivate(fmt.Sprintf("%s is not a directory (a symlink or file was put there); remove it", dir))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return notPrivate(fmt.Sprintf("%s belongs to uid %d, not to you (uid %d): another user made it to capture or block your named locks; ask root to remove it", dir, st.Uid, os.Getuid()))
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return notPrivate(fmt.Sprintf("%s is writable by others (mode %v); run chmod 700 on it", dir, fi.Mode().Perm()))
	}
	return nil
}
