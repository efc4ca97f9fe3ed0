//go:build !unix

package fairq

import (
	"context"

	"github.com/hold-dev/hold/internal/core"
)

// front fails: the queue is built on flock(2), and on this system fair
// mode is not implemented yet.
func front(ctx context.Context, req *core.Request, wait, ticketFiles bool, free func() bool) (*Place, error) {
	return nil, &core.Error{Op: "acquire", Path: req.Path, Err: core.ErrUnsupported,
		Hint: "fair mode is implemented on unix systems only"}
}

func waiting(lockPath string) (int, error) { return 0, nil }

func headWaiter(lockPath string) (Waiter, bool) { return Waiter{}, false }
