package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// Tests of permissions re-run this test binary as another user (see
// runAs in perm_unix_test.go): TestMain then runs one update or append
// instead of the tests. Its parameters come in these variables.
const (
	envWorker = "HOLD_ATOMICFILE_WORKER" // "update", "append" or "syncfs"
	envFile   = "HOLD_ATOMICFILE_FILE"
	envOpts   = "HOLD_ATOMICFILE_OPTS" // words: "split", "owner"
)

func TestMain(m *testing.M) {
	if op := os.Getenv(envWorker); op != "" {
		os.Exit(worker(op))
	}
	os.Exit(testenv.Run(m))
}

// worker runs one update (to "replaced\n") or append ("appended\n") of
// the file, or syncs its file system (syncfs, Linux only), and prints
// "fn called" when the update's fn runs, then the error and its hint. It exits 0 when the
// operation was refused for permission, 1 when it succeeded, 2 on any
// other error.
func worker(op string) int {
	path := os.Getenv(envFile)
	var o Options
	for _, w := range strings.Fields(os.Getenv(envOpts)) {
		switch w {
		case "split":
			o.AllowSplit = true
		case "owner":
			o.AllowOwnerChange = true
		}
	}
	o.Warn = func(err error) { fmt.Println("warning:", err) }
	var err error
	if op == "syncfs" {
		err = syncFS(path)
	} else if op == "append" {
		err = AppendTo(OS{}, path, false, []byte("appended\n"), nil)
	} else {
		err = UpdateWith(OS{}, path, o, func([]byte) ([]byte, error) {
			fmt.Println("fn called")
			return []byte("replaced\n"), nil
		}, nil)
	}
	fmt.Println(err)
	if h := Hint(err); h != "" {
		fmt.Println("hint:", h)
	}
	switch {
	case err == nil:
		return 1
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return 0
	}
	return 2
}
