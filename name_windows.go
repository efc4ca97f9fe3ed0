package hold

import "os"

// checkPrivateDir has nothing to check on Windows: the directory lies under
// the user's own profile, which other users cannot write.
func checkPrivateDir(dir string) error { return nil }

// lockDirShared has nothing to do on Windows: no cleaner ages the user's
// local application data folder.
func lockDirShared(dir string) *os.File { return nil }
