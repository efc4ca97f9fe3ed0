package flock

import (
	"path/filepath"
	"testing"
)

// BenchmarkTryAcquireRelease is an uncontended kernel lock taken and
// given back, nobody watching it: the watch must cost it nothing.
func BenchmarkTryAcquireRelease(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.lock")
	var p Protocol
	b.ReportAllocs()
	for b.Loop() {
		h, err := p.TryAcquire(request(path, false))
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTryAcquireWatchRelease is the same with the hold watched for
// its loss (Lost asked for, as `hold run`, hold.Do and the agent do): what
// joining and leaving the watch costs.
func BenchmarkTryAcquireWatchRelease(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.lock")
	var p Protocol
	b.ReportAllocs()
	for b.Loop() {
		h, err := p.TryAcquire(request(path, false))
		if err != nil {
			b.Fatal(err)
		}
		if h.Lost() == nil {
			b.Fatal("no Lost channel")
		}
		if err := h.Release(); err != nil {
			b.Fatal(err)
		}
	}
}
