package etcd

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// How one step is retried: at least minAttempts times (the client sends
// each attempt to the next member), pausing at most maxRetryPause between
// two.
const (
	minAttempts   = 3
	maxRetryPause = 500 * time.Millisecond
)

// call runs one round trip, bounded by the request timeout, and tries it
// again when the member that answered was shutting down or between leaders:
// the client then sends the next attempt to another member. It does not
// retry when the client has no connection at all, so an unreachable
// cluster fails fast. It gives up after minAttempts once the request
// timeout has passed since the first attempt: long enough for an
// election, and for a member that hangs to be passed over. retried tells f
// whether an earlier attempt may have been applied without its answer
// arriving.
func (p *Protocol) call(ctx context.Context, f func(ctx context.Context, retried bool) error) error {
	var err error
	start := time.Now()
	for attempt := 0; ; attempt++ {
		rctx, cancel := p.rpc(ctx)
		err = f(rctx, attempt > 0)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) ||
			(attempt+1 >= minAttempts && time.Since(start) > p.reqTimeout) {
			return err
		}
		if !p.connected() {
			// Make the next attempt (ours or the caller's) dial at
			// once instead of after gRPC's growing back-off.
			p.client.ActiveConnection().ResetConnectBackoff()
			return err
		}
		t := time.NewTimer(min(time.Duration(attempt+1)*50*time.Millisecond, maxRetryPause))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// transient reports whether err is a failure that another attempt, likely
// on another member, can cure: a member stopping, no leader or a leader
// change, a request that timed out inside the cluster.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	switch {
	case errors.Is(err, rpctypes.ErrStopped), errors.Is(err, rpctypes.ErrNoLeader),
		errors.Is(err, rpctypes.ErrLeaderChanged), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost),
		errors.Is(err, rpctypes.ErrTooManyRequests), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return true
		case codes.Unknown:
			// raft.ErrStopped reaches the client as "raft: stopped".
			return strings.Contains(s.Message(), "stopped")
		}
	}
	return false
}
