//go:build !unix

package fairq

import (
	"context"

	"github.com/hold-dev/hold/internal/core"
)

// acquire fails: the queue is built on flock(2), and on this system fair
// mode is not implemented yet.
func (p Protocol) acquire(ctx context.Context, req *core.Request, wait bool) (core.Handle, error) {
	return nil, &core.Error{Op: "acquire", Path: req.Path, Err: core.ErrUnsupported,
		Hint: "fair mode is implemented on unix systems only"}
}

func waiting(lockPath string) (int, error) { return 0, nil }
