// Package tcplock is a lock protocol for hold written outside hold, with
// only its exported API: locks served by a small TCP server. It shows what
// a third-party protocol implements (lock.Protocol and lock.Handle, which
// package hold aliases), that the contract package lock is all of hold it
// imports, and that hold's conformance suite (holdtest) checks it like
// hold's own; it is an example, not a lock service to deploy (one server, no persistence,
// no authentication).
//
// The wire protocol is lines of text. Every lock is held over a
// connection of its own, so a holder that dies, or whose connection
// drops, frees its lock the moment the server sees the connection close:
//
//	LOCK <name> <wait 0|1> <owner JSON>   -> OK <token> | BUSY <fence> <owner JSON>
//	CHECK                                 -> OK
//	UNLOCK                                -> OK (then the server closes)
//	STAT <name>                           -> FREE <fence> | HELD <fence> <owner JSON>
//	KICK <name>                           -> OK (the holder's connection is closed)
//
// Names and JSON contain no spaces or newlines: names are escaped with
// url.PathEscape, and the JSON encoder writes none.
package tcplock

import (
	"bufio"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// A Server serves locks on a TCP listener.
type Server struct {
	ln net.Listener

	mu    sync.Mutex
	fence uint64 // the last token handed out, for every name
	locks map[string]*entry
}

// entry is one name's lock: its holder and its queue of waiters.
type entry struct {
	holder  *waiter
	owner   string // the holder's owner record
	waiters []*waiter
	fence   uint64 // the last token of this name
}

// waiter is a connection asking for, or holding, a lock.
type waiter struct {
	conn    net.Conn
	owner   string
	granted chan uint64
}

// Start serves locks on addr (such as "127.0.0.1:0") until Close.
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, locks: map[string]*entry{}}
	go s.serve()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening. Connections already made go on.
func (s *Server) Close() error { return s.ln.Close() }

func (s *Server) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

func (s *Server) entry(name string) *entry {
	e := s.locks[name]
	if e == nil {
		e = &entry{}
		s.locks[name] = e
	}
	return e
}

// handle serves one connection. A connection that asked for a lock
// belongs to it until it closes.
func (s *Server) handle(c net.Conn) {
	defer c.Close()
	r := bufio.NewScanner(c)
	var mine *waiter
	var name string
	defer func() {
		if mine != nil {
			s.leave(name, mine)
		}
	}()
	for r.Scan() {
		f := strings.SplitN(r.Text(), " ", 4)
		switch {
		case f[0] == "LOCK" && len(f) == 4 && mine == nil:
			name = f[1]
			mine = &waiter{conn: c, owner: f[3], granted: make(chan uint64, 1)}
			if busy, fence, owner := s.join(name, mine, f[2] == "1"); busy {
				mine = nil
				c.Write([]byte("BUSY " + strconv.FormatUint(fence, 10) + " " + owner + "\n"))
				continue
			}
			// Wait for the grant; the client cancels a wait by closing.
			go func(w *waiter) {
				if tok, ok := <-w.granted; ok {
					c.Write([]byte("OK " + strconv.FormatUint(tok, 10) + "\n"))
				}
			}(mine)
		case f[0] == "CHECK":
			c.Write([]byte("OK\n"))
		case f[0] == "UNLOCK":
			if mine != nil {
				s.leave(name, mine)
				mine = nil
			}
			c.Write([]byte("OK\n"))
			return
		case f[0] == "STAT" && len(f) == 2:
			c.Write([]byte(s.stat(f[1]) + "\n"))
		case f[0] == "KICK" && len(f) == 2:
			s.mu.Lock()
			if e := s.locks[f[1]]; e != nil && e.holder != nil {
				e.holder.conn.Close()
			}
			s.mu.Unlock()
			c.Write([]byte("OK\n"))
		default:
			c.Write([]byte("ERR bad request\n"))
		}
	}
}

// join grants w the lock on name or queues it; with wait false a busy
// lock is reported instead, with its holder.
func (s *Server) join(name string, w *waiter, wait bool) (busy bool, fence uint64, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(name)
	if e.holder != nil || len(e.waiters) > 0 {
		if !wait {
			return true, e.fence, e.owner
		}
		e.waiters = append(e.waiters, w)
		return false, 0, ""
	}
	s.grant(e, w)
	return false, 0, ""
}

// grant makes w the holder of e. Called with s.mu held.
func (s *Server) grant(e *entry, w *waiter) {
	s.fence++
	e.holder, e.owner, e.fence = w, w.owner, s.fence
	w.granted <- s.fence
}

// leave takes w out of name's lock, as holder or waiter, and passes the
// lock on.
func (s *Server) leave(name string, w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(name)
	if e.holder == w {
		e.holder, e.owner = nil, ""
		if len(e.waiters) > 0 {
			next := e.waiters[0]
			e.waiters = e.waiters[1:]
			s.grant(e, next)
		}
		return
	}
	for i, x := range e.waiters {
		if x == w {
			e.waiters = append(e.waiters[:i], e.waiters[i+1:]...)
			close(w.granted)
			return
		}
	}
}

func (s *Server) stat(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.locks[name]
	switch {
	case e == nil:
		return "FREE 0"
	case e.holder == nil:
		return "FREE " + strconv.FormatUint(e.fence, 10)
	}
	return "HELD " + strconv.FormatUint(e.fence, 10) + " " + e.owner
}

// escape makes a lock path one word of the wire protocol.
func escape(path string) string { return url.PathEscape(path) }
