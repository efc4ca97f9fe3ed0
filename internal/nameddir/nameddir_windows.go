package nameddir

import (
	"os"
	"path/filepath"
)

// dir is under the user's local application data folder (what
// os.UserCacheDir returns), which Windows sets the same for every process
// of the user, services running as that user included, and no cleaner
// empties while a file in it is open.
func dir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "hold", "locks"), nil
}

// earlier is empty: Windows kept named locks where it keeps them now.
func earlier(bool) []string { return nil }

// CheckPrivate returns nil when dir exists: it lies under the user's own
// profile, which other users cannot write.
func CheckPrivate(dir string) error {
	_, err := os.Stat(dir)
	return err
}
