package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// session is a lease and the loop that keeps it alive.
//
// The loop renews the lease itself, one keep-alive at a time, instead of
// using the client's keep-alive stream, because the moment a holder must
// give up depends on when each acknowledged keep-alive was sent: etcd
// extends the lease when a keep-alive arrives, so a keep-alive sent at t
// and acknowledged guarantees the lease lives until at least t plus the
// TTL, and nobody else can be granted the lock before then. The stream
// does not say which request an answer belongs to.
//
// The loop never gives up while etcd is unreachable: when etcd answers
// again it says whether the lease still exists (a restarted etcd renews
// every lease), and only then is the session over. Held locks do not wait
// for that: each declares itself lost at its own deadline, computed from
// the last acknowledgement (see lossDeadline).
type session struct {
	id   clientv3.LeaseID
	stop context.CancelFunc
	// done is closed when the session is over: after stop, or when etcd
	// said the lease does not exist (expired or revoked).
	done chan struct{}

	mu sync.Mutex
	// ackSent is when the last acknowledged keep-alive (or the grant)
	// was sent; ttl is the TTL etcd granted with it.
	ackSent time.Time
	ttl     time.Duration
	// budget is the shortest time any lock on this lease may go without
	// an acknowledged keep-alive (see Protocol.budget); the loop renews
	// often enough that a few keep-alives fit in it.
	budget time.Duration
	// renewed is closed and replaced on each acknowledgement, so that a
	// lock waiting for its deadline rechecks it.
	renewed chan struct{}
}

// safetyMargin is how much earlier than StopWithin asks a held lock is
// declared lost: room for this process's timers to fire late (a loaded
// machine, a GC pause) and for the clocks of etcd's leader and this
// machine to run at slightly different rates.
func safetyMargin(ttl time.Duration) time.Duration {
	return max(2*time.Second, ttl/10) + ttl/20
}

// Shortest and longest pause between two keep-alives, and between two
// attempts of one that failed.
const (
	minRenewPeriod = 100 * time.Millisecond
	maxRetryPeriod = time.Second
)

func (p *Protocol) newSession(ctx context.Context, budget time.Duration) (*session, error) {
	var lease *clientv3.LeaseGrantResponse
	var sent time.Time
	err := p.call(ctx, func(ctx context.Context, _ bool) (err error) {
		sent = time.Now()
		lease, err = p.client.Grant(ctx, p.ttlSeconds())
		return err
	})
	if err != nil {
		return nil, err
	}
	kctx, stop := context.WithCancel(p.client.Ctx())
	s := &session{id: lease.ID, stop: stop, done: make(chan struct{}),
		ackSent: sent, ttl: time.Duration(lease.TTL) * time.Second, budget: budget,
		renewed: make(chan struct{})}
	go s.keepAlive(kctx, p)
	return s, nil
}

// keepAlive renews the lease until ctx ends or etcd says it is gone.
func (s *session) keepAlive(ctx context.Context, p *Protocol) {
	defer close(s.done)
	failures := 0
	for {
		pause := s.period()
		if failures > 0 {
			pause = min(time.Duration(failures)*minRenewPeriod, maxRetryPeriod, pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, min(p.reqTimeout, max(s.period(), time.Second)))
		resp, err := p.client.KeepAliveOnce(actx, s.id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			failures = 0
			s.acked(sent, time.Duration(resp.TTL)*time.Second)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return
		default:
			failures++
		}
	}
}

// period is how long the loop waits between two keep-alives: a third of
// the shortest budget, so that two can fail before a lock must give up.
func (s *session) period() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(min(s.ttl, s.budget)/3, minRenewPeriod)
}

func (s *session) acked(sent time.Time, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.After(s.ackSent) {
		s.ackSent = sent
	}
	if ttl > 0 {
		s.ttl = ttl
	}
	close(s.renewed)
	s.renewed = make(chan struct{})
}

// useBudget makes the loop renew often enough for a lock with this budget.
func (s *session) useBudget(budget time.Duration) {
	s.mu.Lock()
	s.budget = min(s.budget, budget)
	s.mu.Unlock()
}

// expiry is the earliest moment etcd may end the lease as far as this
// process knows, and a channel closed when that moment moves.
func (s *session) expiry() (time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ackSent.Add(s.ttl), s.renewed
}

// lossDeadline is the moment a lock on s that needs stopWithin to stop is
// declared lost unless a keep-alive is acknowledged first (renewed is
// closed then): the earliest moment etcd may let the lease expire, less
// stopWithin and the safety margin. A waiter is granted the lock only
// before it, too (see grant).
func (p *Protocol) lossDeadline(s *session, stopWithin time.Duration) (deadline time.Time, renewed <-chan struct{}) {
	expiry, renewed := s.expiry()
	return expiry.Add(-stopWithin - safetyMargin(p.ttl)), renewed
}

// budget is how long a lock that needs stopWithin to stop may go without
// an acknowledged keep-alive: its lease's TTL less stopWithin and the
// safety margin. It is not positive when the TTL is too short for it.
func (p *Protocol) budget(stopWithin time.Duration) time.Duration {
	return p.ttl - stopWithin - safetyMargin(p.ttl)
}

// session returns the protocol's lease, which every lock it takes shares
// (as the locks of one concurrency.Session do): one grant and one
// keep-alive loop for the whole process instead of one per acquisition.
// It grants a new lease when there is none yet or the last one ended.
//
// After Close it grants none: the lease is granted with leaseMu held, so a
// grant under way when Close is called is in p.lease when Close takes it,
// and is revoked.
func (p *Protocol) session(ctx context.Context, budget time.Duration) (*session, error) {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	if s := p.lease; s != nil {
		select {
		case <-s.done:
		default:
			s.useBudget(budget)
			return s, nil
		}
	}
	s, err := p.newSession(ctx, budget)
	if err != nil {
		return nil, err
	}
	p.lease = s
	return s, nil
}

// errClosed refuses an acquisition through a Protocol that was closed, and
// ends the waits under way when it was.
var errClosed = errors.New("the etcd protocol was closed")

// isClosed reports whether Close was called.
func (p *Protocol) isClosed() bool {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	return p.closed
}

// dropSession stops renewing s, which etcd no longer knows, and has the
// next acquisition grant a new lease. Every lock on s is lost already.
func (p *Protocol) dropSession(s *session) {
	p.leaseMu.Lock()
	if p.lease == s {
		p.lease = nil
	}
	p.leaseMu.Unlock()
	s.stop()
}
