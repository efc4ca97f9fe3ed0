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

// maxAttempts bounds how often one step is tried when a member answers
// with a passing failure.
const maxAttempts = 6

// call runs one round trip, bounded by the request timeout, and tries it
// again when the member that answered was shutting down or between leaders:
// the client then sends the next attempt to another member. It does not
// retry when the client has no connection at all, so an unreachable
// cluster fails fast. retried tells f whether an earlier attempt may have
// been applied without its answer arriving.
func (p *Protocol) call(ctx context.Context, f func(ctx context.Context, retried bool) error) error {
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		rctx, cancel := p.rpc(ctx)
		err = f(rctx, attempt > 0)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) {
			return err
		}
		if !p.connected() {
			// Make the next attempt (ours or the caller's) dial at
			// once instead of after gRPC's growing back-off.
			p.client.ActiveConnection().ResetConnectBackoff()
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
	return err
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
