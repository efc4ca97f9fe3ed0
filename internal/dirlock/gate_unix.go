//go:build unix

package dirlock

import (
	"context"

	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/lock"
)

// openGate takes a place in the gate's queue and, with wait, waits to
// reach its front (see GateSuffix). leave gives the place up.
func openGate(ctx context.Context, req *lock.Request, wait bool) (leave func(), err error) {
	pl, err := fairq.Front(ctx, req, wait)
	if err != nil {
		return nil, err
	}
	return pl.Leave, nil
}
