package flock

import (
	"context"
	"errors"
	"strconv"

	"github.com/hold-dev/hold/lock"
)

// errNoFD: Windows has no flock(2) on an inherited descriptor number.
var errNoFD = errors.New("locking a descriptor by its number needs flock(2), which Windows lacks")

// LockFD is flock(1)'s descriptor form; Windows refuses it.
func LockFD(ctx context.Context, fd int, shared, nonblock bool, keeper *lock.Owner) error {
	return &lock.Error{Op: "lock", Path: "descriptor " + strconv.Itoa(fd), Err: lock.ErrUnsupported,
		Hint: errNoFD.Error() + "; name the file instead: hold run --lock-file FILE -- COMMAND"}
}

// UnlockFD is flock(1)'s -u; Windows refuses it.
func UnlockFD(fd int, keeper int) error { return LockFD(context.Background(), fd, false, true, nil) }
