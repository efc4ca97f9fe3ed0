package pgtest

import "syscall"

// sysProcAttr: the test server is not run on Windows as another user.
func sysProcAttr(int, int, bool) *syscall.SysProcAttr { return nil }
