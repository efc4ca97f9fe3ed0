package dirlock

import (
	"os"
	"testing"

	"golang.org/x/sys/windows"
)

// What Windows reports while a directory is being created or removed by
// another process is contention, never a failure.
func TestWindowsContentionErrors(t *testing.T) {
	pe := func(err error) error { return &os.PathError{Op: "mkdir", Path: `C:\x.lock`, Err: err} }
	for _, err := range []error{pe(windows.ERROR_ALREADY_EXISTS), pe(windows.ERROR_FILE_EXISTS), pe(windows.ERROR_ACCESS_DENIED), pe(windows.ERROR_SHARING_VIOLATION)} {
		if !isMkdirContention(err) {
			t.Errorf("mkdir %v is not contention", err)
		}
	}
	for _, err := range []error{pe(windows.ERROR_ACCESS_DENIED), pe(windows.ERROR_SHARING_VIOLATION), pe(windows.ERROR_DIR_NOT_EMPTY)} {
		if !isRemoveContention(err) {
			t.Errorf("remove %v is not contention", err)
		}
	}
	if isMkdirContention(pe(windows.ERROR_PATH_NOT_FOUND)) {
		t.Error("a missing parent directory is not contention")
	}
}
