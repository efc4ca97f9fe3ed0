//go:build unix

package main

import (
	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/dirlock"
)

// portableOptions selects hold's portable directory protocol. The hold
// package has no option for it yet, so the suite uses the protocol itself
// (this module's path lies under hold's, which lets it import hold's
// internal packages); once hold exposes one, use it here instead. Return
// nil to leave the "hold portable" row out.
func portableOptions() []hold.Option {
	return []hold.Option{hold.WithProtocol(dirlock.New(dirlock.Config{}))}
}
