//go:build !linux

package faultnet

import (
	"errors"
	"os/exec"
)

// Link is a network namespace joined to this one; only Linux has them.
type Link struct {
	NS           string
	HostIP, NSIP string
}

// ErrNoNetns means network namespaces cannot be made here.
var ErrNoNetns = errors.New("faultnet: network namespaces are Linux's")

// NewLink fails: no network namespaces here.
func NewLink() (*Link, error) { return nil, ErrNoNetns }

// Command runs name (never called: NewLink fails).
func (l *Link) Command(name string, arg ...string) *exec.Cmd { return exec.Command(name, arg...) }

// Wrap returns argv.
func (l *Link) Wrap(argv ...string) []string { return argv }

// Cut does nothing.
func (l *Link) Cut() error { return ErrNoNetns }

// Heal does nothing.
func (l *Link) Heal() error { return ErrNoNetns }

// Close does nothing.
func (l *Link) Close() error { return nil }
