//go:build unix && !linux

package fairq

import (
	"context"

	"github.com/hold-dev/hold/lock"
)

// Without open file description locks (Linux only), the queue is a
// directory of ticket files.
func front(ctx context.Context, req *lock.Request, wait, ticketFiles bool, free func() bool) (*Place, error) {
	return frontTickets(ctx, req, wait, free)
}

func headWaiter(lockPath string) (Waiter, bool) { return Waiter{}, false }

func waiting(lockPath string) (int, error) { return waitingTickets(lockPath) }
