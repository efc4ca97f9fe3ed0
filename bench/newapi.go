//go:build !hold_baseline

package main

import "github.com/hold-dev/hold"

// A baseline run (-baseline REV) builds this suite a second time against
// an older hold, whose API may lack what later rows use. Every use of an
// option newer than the oldest revision the comparison is meant for
// (8a1b227, the tree before the semaphores and the deadlock search) goes
// through this file: the baseline is built with the tag hold_baseline,
// under which newapi_baseline.go stands in and those rows are left out.
// The rows a baseline run compares (baselineImpls) use none of them.

// slotsOption is hold.Slots(n); ok is false where hold has no semaphores.
func slotsOption(n int) (o hold.Option, ok bool) { return hold.Slots(n), true }

// searchOffOption is hold.DeadlockAfter(0); ok is false where hold has no
// deadlock search.
func searchOffOption() (o hold.Option, ok bool) { return hold.DeadlockAfter(0), true }
