//go:build unix

package main

import (
	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// portableOptions selects hold's portable directory protocol, with its
// defaults, for the "hold portable" row. Return nil to leave the row out.
func portableOptions() []hold.Option {
	return []hold.Option{hold.WithProtocol(portable.New())}
}
