//go:build !unix

package fairq

import (
	"context"

	"github.com/hold-dev/hold/lock"
)

// front fails: the queue is built on flock(2), and on this system fair
// mode is not implemented yet.
func front(ctx context.Context, req *lock.Request, wait, ticketFiles bool, free func() bool) (*Place, error) {
	return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrUnsupported,
		Hint: "fair mode is implemented on unix systems only"}
}

func waiting(lockPath string) (int, error) { return 0, nil }

func headWaiter(lockPath string) (Waiter, bool) { return Waiter{}, false }
