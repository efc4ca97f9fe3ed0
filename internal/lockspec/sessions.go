package lockspec

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold"
)

// A network scheme's protocol is a client: a connection, and for etcd a
// lease that every lock taken through it shares. The command line takes
// one lock per process and closes the protocol with it; the agent serves a
// long-lived program many locks, and dialling for each (a connection, a
// lease or session, and their close) cost an etcd lock 3.4 ms where a
// reused session takes 0.2 ms. So the agent keeps its protocols
// (KeepSessions): requests whose connection and settings are the same
// share one, as the locks of one Go program's Dial do, and it is closed
// when no lock has used it for a while, or when the agent ends.

// Session is what a SessionResolver makes of an address target: the lock's
// path in a protocol, and how to get that protocol.
type Session struct {
	// Key names everything the protocol depends on: endpoints,
	// credentials and settings (an etcd lease's TTL). Requests with equal
	// keys may share one protocol; any setting that differs must make the
	// key differ. It never leaves the process.
	Key string
	// Path is the lock's path (key, name) within the protocol.
	Path string
	// Dial connects: the protocol, ready to use.
	Dial func() (hold.Protocol, error)
}

// SessionResolver is a SchemeResolver split in two, so that a protocol
// may be kept and shared (see KeepSessions): it checks the target and the
// settings of s and says what to dial, without dialling.
type SessionResolver func(target string, s *Spec) (*Session, error)

// sessionSchemes are the schemes whose protocols may be kept.
var sessionSchemes = map[string]SessionResolver{}

// RegisterSessionScheme registers how a scheme's protocols are shared when
// they are kept (KeepSessions), beside its SchemeResolver (RegisterScheme),
// which serves the command line. Call it from an init function.
func RegisterSessionScheme(scheme string, r SessionResolver) {
	if _, dup := sessionSchemes[scheme]; dup {
		panic("lockspec: session scheme " + scheme + " registered twice")
	}
	sessionSchemes[scheme] = r
}

// kept is the cache of KeepSessions, nil when protocols are not kept.
var kept atomic.Pointer[sessionCache]

// sessionCache keeps one protocol per session key.
type sessionCache struct {
	idle time.Duration
	// dials counts the protocols dialled, for tests (Dials).
	dials atomic.Int64

	mu     sync.Mutex
	closed bool
	m      map[string]*keptSession
}

// keptSession is one kept protocol and the requests using it.
type keptSession struct {
	// ready is closed once the dial is over: proto or err is set.
	ready chan struct{}
	proto hold.Protocol
	err   error
	// users counts the resolved requests not yet closed; when it drops
	// to zero, timer closes the protocol after the idle time.
	users int
	timer *time.Timer
}

// KeepSessions makes this process keep the protocols of network targets
// (those whose scheme registered a SessionResolver) and share them between
// requests with the same session key, from now until closeAll: the agent,
// which serves one program many locks. A protocol no request has used for
// idle is closed, so that an agent left running does not keep connections
// for ever; the next request dials again. closeAll closes every kept
// protocol; call it once the locks are released.
//
// Sharing is the library's own: the locks taken through one etcd protocol
// share its lease, so a lease's loss is every one of those locks' loss, as
// for the locks of a Go program's one etcd.Dial; each PostgreSQL lock has a
// session of its own, taken from the protocol's idle connections.
func KeepSessions(idle time.Duration) (closeAll func()) {
	c := &sessionCache{idle: idle, m: map[string]*keptSession{}}
	kept.Store(c)
	var once sync.Once
	return func() { once.Do(func() { kept.CompareAndSwap(c, nil); c.closeAll() }) }
}

// Dials returns how many protocols the kept sessions have dialled since
// KeepSessions (0 when protocols are not kept): how tests tell that 50
// locks in a row connect once.
func Dials() int64 {
	if c := kept.Load(); c != nil {
		return c.dials.Load()
	}
	return 0
}

// resolveKept is ResolveAddress when protocols are kept and the target's
// scheme can share them; ok is false otherwise. release ends this
// request's use of the protocol (see Resolved.Close).
func resolveKept(target string, s *Spec) (proto hold.Protocol, path string, release func(), ok bool, err error) {
	c := kept.Load()
	if c == nil {
		return nil, "", nil, false, nil
	}
	r, has := sessionSchemes[AddressScheme(target)]
	if !has {
		return nil, "", nil, false, nil
	}
	ses, err := r(target, s)
	if err != nil {
		return nil, "", nil, true, err
	}
	proto, release, err = c.get(ses)
	if err != nil {
		return nil, "", nil, true, err
	}
	return proto, ses.Path, release, true, nil
}

// get returns the protocol kept for ses's key, dialling it if there is
// none, and the function that ends this use of it.
func (c *sessionCache) get(ses *Session) (hold.Protocol, func(), error) {
	c.mu.Lock()
	if c.closed {
		// The agent is closing: nothing is kept any more.
		c.mu.Unlock()
		p, err := ses.Dial()
		if err != nil {
			return nil, nil, err
		}
		return p, func() { CloseProtocol(p) }, nil
	}
	k := c.m[ses.Key]
	dial := k == nil
	if dial {
		k = &keptSession{ready: make(chan struct{})}
		c.m[ses.Key] = k
	}
	k.users++
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	c.mu.Unlock()
	if dial {
		c.dials.Add(1)
		k.proto, k.err = ses.Dial()
		close(k.ready)
	}
	<-k.ready
	if k.err != nil {
		// Not kept: the next request dials again (and says why it
		// cannot connect, if it still cannot).
		c.mu.Lock()
		k.users--
		if c.m[ses.Key] == k {
			delete(c.m, ses.Key)
		}
		c.mu.Unlock()
		return nil, nil, k.err
	}
	var once sync.Once
	return k.proto, func() { once.Do(func() { c.release(ses.Key, k) }) }, nil
}

// release ends one use of k; the last one starts its idle time.
func (c *sessionCache) release(key string, k *keptSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k.users--
	if k.users > 0 || c.closed {
		return
	}
	k.timer = time.AfterFunc(c.idle, func() {
		c.mu.Lock()
		// Used again meanwhile (it stopped the timer too late), or
		// closed with the others: not ours to close.
		idle := k.users == 0 && c.m[key] == k && !c.closed
		if idle {
			delete(c.m, key)
		}
		c.mu.Unlock()
		if idle {
			CloseProtocol(k.proto)
		}
	})
}

// closeAll closes every kept protocol; later requests dial their own.
func (c *sessionCache) closeAll() {
	c.mu.Lock()
	c.closed = true
	all := c.m
	c.m = map[string]*keptSession{}
	c.mu.Unlock()
	for _, k := range all {
		if k.timer != nil {
			k.timer.Stop()
		}
		<-k.ready
		if k.err == nil {
			CloseProtocol(k.proto)
		}
	}
}
