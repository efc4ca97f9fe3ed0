package hold

// checkPrivateDir has nothing to check on Windows: the directory lies under
// the user's own profile, which other users cannot write.
func checkPrivateDir(dir string) error { return nil }
