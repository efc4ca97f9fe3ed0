package cli

import "testing"

// BenchmarkAgentSpec measures resolving a request's lock options the
// second time: specCache makes it a map lookup instead of a flag set
// (14–22 µs here, more than a free kernel lock costs).
func BenchmarkAgentSpec(b *testing.B) {
	req := &agentRequest{Target: "x"}
	for b.Loop() {
		if _, err := req.spec(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAgentResolveSpec measures resolving them through the flag set.
func BenchmarkAgentResolveSpec(b *testing.B) {
	req := &agentRequest{Target: "x"}
	for b.Loop() {
		s, err := req.resolveSpec()
		if err != nil {
			b.Fatal(err)
		}
		s.close()
	}
}
