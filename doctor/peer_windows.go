package doctor

import (
	"errors"
	"os"
)

// fcntlTryLock: Windows has one kind of file lock, so there is no second
// kind to interact with; the probe is skipped there.
func fcntlTryLock(path string, inProcess bool) (*os.File, bool, error) {
	return nil, false, errors.New("POSIX locks do not exist on Windows")
}
