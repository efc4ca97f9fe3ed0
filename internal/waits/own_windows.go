package waits

import "os"

// openOwn opens the entry at path; on Windows the named-lock directory is
// the user's profile's, which no other user may write.
func openOwn(path string) (*os.File, error) { return os.Open(path) }
