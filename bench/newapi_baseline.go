//go:build hold_baseline

package main

import "github.com/hold-dev/hold"

// The baseline build's stand-ins for newapi.go: the older hold has none of
// these options, so the rows that need them are left out.

func slotsOption(n int) (o hold.Option, ok bool) { return o, false }

func searchOffOption() (o hold.Option, ok bool) { return o, false }
