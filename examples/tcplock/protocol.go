package tcplock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hold-dev/hold/lock"
)

// Protocol takes locks from the server at Addr. It implements
// lock.Protocol: choose it with hold.WithProtocol.
type Protocol struct {
	Addr string
}

// Name returns "tcplock".
func (p *Protocol) Name() string { return "tcplock" }

// Acquire waits in the server's queue until the lock is granted or ctx
// ends; an abandoned wait closes its connection, which takes it out of the
// queue.
func (p *Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	return p.lock(ctx, req, true)
}

// TryAcquire takes the lock if it is free and nobody waits for it.
func (p *Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	return p.lock(context.Background(), req, false)
}

func (p *Protocol) lock(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	if req.Shared {
		return nil, lock.ExclusiveOnly("acquire", req.Path, "tcplock")
	}
	if err := ctx.Err(); err != nil {
		return nil, waitError(req.Path, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", p.Addr)
	if err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: err}
	}
	owner := req.Owner
	owner.StartedAt = time.Now()
	owner.Protocol = "tcplock"
	record, err := json.Marshal(owner)
	if err != nil {
		conn.Close()
		return nil, err
	}
	w := "0"
	if wait {
		w = "1"
	}
	fmt.Fprintf(conn, "LOCK %s %s %s\n", escape(req.Path), w, record)
	replies := bufio.NewScanner(conn)
	reply := make(chan string, 1)
	go func() {
		if replies.Scan() {
			reply <- replies.Text()
		}
		close(reply)
	}()
	var line string
	select {
	case line = <-reply:
	case <-ctx.Done():
		conn.Close() // leaves the queue
		return nil, waitError(req.Path, ctx.Err())
	}
	f := strings.SplitN(line, " ", 3)
	switch {
	case len(f) == 2 && f[0] == "OK":
		tok, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			conn.Close()
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: fmt.Errorf("bad reply %q", line)}
		}
		owner.Fence = tok
		h := &handle{conn: conn, path: req.Path, owner: owner, acks: make(chan struct{}, 1)}
		go h.read(replies)
		return h, nil
	case len(f) == 3 && f[0] == "BUSY":
		conn.Close()
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrBusy, Holder: holderOf(f[2])}
	}
	conn.Close()
	return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: fmt.Errorf("server closed the connection or replied %q", line)}
}

// waitError is the error of a wait that its context ended: lock.WaitError
// makes it match ctx's error, and lock.ErrTimeout for a deadline, as the
// contract asks.
func waitError(path string, err error) error {
	return &lock.Error{Op: "acquire", Path: path, Err: lock.WaitError(err)}
}

// holderOf decodes an owner record sent by the server.
func holderOf(record string) *lock.Holder {
	var o lock.Owner
	if json.Unmarshal([]byte(record), &o) != nil {
		return &lock.Holder{}
	}
	return &lock.Holder{Owner: &o}
}

// Inspect asks the server about the lock at path.
func (p *Protocol) Inspect(path string) (*lock.Status, error) {
	line, err := p.ask("STAT " + escape(path))
	if err != nil {
		return nil, &lock.Error{Op: "inspect", Path: path, Err: err}
	}
	st := &lock.Status{Path: path, Protocol: "tcplock", State: lock.Free}
	f := strings.SplitN(line, " ", 3)
	if len(f) >= 2 {
		st.Fence, _ = strconv.ParseUint(f[1], 10, 64)
	}
	if f[0] == "HELD" && len(f) == 3 {
		st.State, st.Holder = lock.HeldExclusive, holderOf(f[2])
	}
	return st, nil
}

// Kick has the server take the lock at path from its holder, as an
// administrator would.
func (p *Protocol) Kick(path string) error {
	_, err := p.ask("KICK " + escape(path))
	return err
}

// ask sends one request on a connection of its own and returns the reply.
func (p *Protocol) ask(request string) (string, error) {
	conn, err := net.DialTimeout("tcp", p.Addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	fmt.Fprintln(conn, request)
	r := bufio.NewScanner(conn)
	if !r.Scan() {
		return "", errors.New("no reply from the lock server")
	}
	return r.Text(), nil
}

// handle is one held lock: its connection.
type handle struct {
	conn  net.Conn
	path  string
	owner lock.Owner
	lost  lock.LostState // marked when the connection ends before Release
	acks  chan struct{}  // the server's replies to CHECK and UNLOCK

	mu       sync.Mutex
	released bool
	result   error // Release's result, once released
}

// read receives the server's replies until the connection ends; an end
// that Release did not ask for means the lock is lost.
func (h *handle) read(r *bufio.Scanner) {
	for r.Scan() {
		h.acks <- struct{}{}
	}
	h.lost.MarkLost("the lock server ended this lock's connection")
}

func (h *handle) Fence() uint64         { return h.owner.Fence }
func (h *handle) Owner() *lock.Owner    { o := h.owner; return &o }
func (h *handle) Lost() <-chan struct{} { return h.lost.Lost() }

// Check asks the server whether the connection, and so the lock, lives.
func (h *handle) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return &lock.Error{Op: "check", Path: h.path, Err: lock.ErrReleased}
	}
	return h.roundTrip("check", "CHECK")
}

// roundTrip sends request and waits for its acknowledgement, or the loss
// of the connection; op names the operation in the error. Called with h.mu
// held.
func (h *handle) roundTrip(op, request string) error {
	lost := h.lost.Lost()
	if _, err := fmt.Fprintln(h.conn, request); err != nil {
		<-lost
		return h.lost.Err(op, h.path)
	}
	select {
	case <-h.acks:
		return nil
	case <-lost:
		// The reader passes an acknowledgement on before it sees the
		// connection end (the server closes it after UNLOCK's).
		select {
		case <-h.acks:
			return nil
		default:
			return h.lost.Err(op, h.path)
		}
	}
}

// Release gives the lock back; it is idempotent, returning what the first
// call returned.
func (h *handle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.result
	}
	h.released = true
	if h.result = h.lost.Err("release", h.path); h.result == nil {
		h.result = h.roundTrip("release", "UNLOCK")
	}
	// The server ends the connection after UNLOCK: that is no loss.
	h.lost.Seal()
	h.conn.Close()
	return h.result
}
