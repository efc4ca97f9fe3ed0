package agent

import (
	"io"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkAgentSpec measures turning a request's lock options into the
// lock to take: what every acquire, try and status pays before the lock.
func BenchmarkAgentSpec(b *testing.B) {
	req := &request{Target: "x"}
	for b.Loop() {
		s, err := req.resolve()
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkAgentSyncCycle measures the agent's own work for a free lock
// taken and released on the synchronous channel: parsing both requests,
// the lock, and encoding both replies (the channel's I/O not included).
func BenchmarkAgentSyncCycle(b *testing.B) {
	a := newAgent(io.Discard)
	defer a.shutdown()
	try := []byte(`{"id":1,"op":"try","target":"` + filepath.Join(b.TempDir(), "t") + `","queue":true,"lazy":true}`)
	for b.Loop() {
		req, bad := parseRequest(try)
		if bad != nil {
			b.Fatal(bad.Error.Message)
		}
		r, _ := a.syncDispatch(req)
		if !r.OK {
			b.Fatal(r.Error.Message)
		}
		encodeReply(r)
		rel := []byte(`{"id":2,"op":"release","lock":` + strconv.FormatUint(r.Lock, 10) + `}`)
		req, _ = parseRequest(rel)
		if r, _ = a.syncDispatch(req); !r.OK {
			b.Fatal(r.Error.Message)
		}
		encodeReply(r)
	}
}
