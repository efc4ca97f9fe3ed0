//go:build !linux

package postgres

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist (as
// libpq ignores the keyword there): the client's keep-alive still notices
// a dead server, and the server-side bounds do not depend on it.
func setUserTimeout(fd uintptr, d time.Duration) error { return nil }
