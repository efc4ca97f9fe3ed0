// Package faultnet makes network faults for tests: a TCP proxy on loopback
// that stops forwarding when told, as a stalled proxy or a partition behind
// one does, and (on Linux, as root) a network namespace joined to this one
// by a veth pair that a test cuts, a real partition. Only tests import it.
package faultnet

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from a loopback port to a target. Cut
// stops it forwarding anything, in both directions, while it keeps every
// connection open: each end's socket stays healthy and hears nothing, as
// behind a proxy whose other side is partitioned. Heal forwards again,
// what was held back included.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	healed *sync.Cond
	conns  []net.Conn
	closed bool
}

// NewProxy listens on 127.0.0.1 and forwards to target ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target}
	p.healed = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Cut stops forwarding.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal forwards again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.healed.Broadcast()
	p.mu.Unlock()
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed, p.cut = true, false
	conns := p.conns
	p.conns = nil
	p.healed.Broadcast()
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	// A connection made while cut is accepted (the listener is
	// healthy) and connected upstream only once healed.
	if !p.wait() {
		c.Close()
		return
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns = append(p.conns, c, u)
	p.mu.Unlock()
	go p.pipe(u, c)
	p.pipe(c, u)
}

// wait blocks while the proxy is cut, and reports false once it is closed.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cut && !p.closed {
		p.healed.Wait()
	}
	return !p.closed
}

// pipe copies from src to dst, holding every chunk back while cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}
