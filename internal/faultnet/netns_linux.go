package faultnet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
)

// Link is a network namespace of the test's own, joined to the test's
// namespace by a veth pair: HostIP is this side's address, NSIP the
// namespace's. A process started with Command runs inside the namespace and
// reaches a server listening on HostIP; Cut takes the namespace's end of
// the pair down, so that nothing passes either way while both ends'
// sockets stay open: a real partition, which each side's TCP sees only by
// its own timers.
type Link struct {
	NS           string
	HostIP, NSIP string
	hostIf, nsIf string
	removed      bool
}

var linkSeq atomic.Uint32

// ErrNoNetns means network namespaces cannot be made here (not root, no
// ip(8), or a kernel or sandbox that refuses).
var ErrNoNetns = errors.New("faultnet: cannot make a network namespace")

// NewLink makes a namespace and a veth pair with a /30 of its own in
// 10.251.0.0/16, unused on this machine.
func NewLink() (*Link, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root", ErrNoNetns)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	for attempt := 0; attempt < 16; attempt++ {
		n := uint32(os.Getpid())*16 + linkSeq.Add(1)
		id := fmt.Sprintf("%06x", n&0xffffff)
		l := &Link{NS: "holdt" + id, hostIf: "hh" + id, nsIf: "hn" + id}
		sub := n % (1 << 14) // 16384 /30 subnets in 10.251.0.0/16
		a, b := sub>>6, (sub&63)*4
		l.HostIP, l.NSIP = fmt.Sprintf("10.251.%d.%d", a, b+1), fmt.Sprintf("10.251.%d.%d", a, b+2)
		if out, _ := exec.Command("ip", "-4", "addr", "show", "to", fmt.Sprintf("10.251.%d.%d/30", a, b)).Output(); len(bytes.TrimSpace(out)) > 0 {
			continue // taken by another test process
		}
		if err := l.setUp(); err != nil {
			l.Close()
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: no free address", ErrNoNetns)
}

func (l *Link) setUp() error {
	steps := [][]string{
		{"netns", "add", l.NS},
		{"link", "add", l.hostIf, "type", "veth", "peer", "name", l.nsIf},
		{"link", "set", l.nsIf, "netns", l.NS},
		{"addr", "add", l.HostIP + "/30", "dev", l.hostIf},
		{"link", "set", l.hostIf, "up"},
		{"-n", l.NS, "addr", "add", l.NSIP + "/30", "dev", l.nsIf},
		{"-n", l.NS, "link", "set", l.nsIf, "up"},
		{"-n", l.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			if s[0] == "netns" {
				return fmt.Errorf("%w: %v", ErrNoNetns, err)
			}
			return err
		}
	}
	return nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Command runs name inside the namespace.
func (l *Link) Command(name string, arg ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.NS, name}, arg...)...)
}

// Wrap returns argv prefixed so that it runs inside the namespace.
func (l *Link) Wrap(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", l.NS}, argv...)
}

// Cut partitions the namespace from this one.
func (l *Link) Cut() error { return ip("-n", l.NS, "link", "set", l.nsIf, "down") }

// Heal joins them again.
func (l *Link) Heal() error { return ip("-n", l.NS, "link", "set", l.nsIf, "up") }

// Close removes the pair and the namespace (processes still inside keep
// running, cut off).
func (l *Link) Close() error {
	if l.removed {
		return nil
	}
	l.removed = true
	ip("link", "del", l.hostIf) // removes its peer too
	return ip("netns", "del", l.NS)
}
