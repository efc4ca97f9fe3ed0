package dirlock

import (
	"context"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// openGate takes the kernel lock on the gate file (see GateSuffix): there
// is no queue on Windows (package fairq is unix-only), so waiters are not
// ordered, but only the one holding the gate contends for the directory.
// leave lets go of it.
func openGate(ctx context.Context, req *lock.Request, wait bool) (leave func(), err error) {
	var h lock.Handle
	if wait {
		h, err = flock.Protocol{}.Acquire(ctx, req)
	} else {
		h, err = flock.Protocol{}.TryAcquire(req)
	}
	if err != nil {
		return nil, err
	}
	return func() { h.Release() }, nil
}
