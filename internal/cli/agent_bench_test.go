package cli

import (
	"path/filepath"
	"testing"

	"github.com/hold-dev/hold"
)

func BenchmarkAgentSpec(b *testing.B) {
	req := &agentRequest{Target: "x"}
	for b.Loop() {
		s, err := req.spec()
		if err != nil {
			b.Fatal(err)
		}
		s.close()
	}
}

func BenchmarkTryAcquireRelease(b *testing.B) {
	t := filepath.Join(b.TempDir(), "x")
	for b.Loop() {
		l, err := hold.TryAcquire(t)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}
