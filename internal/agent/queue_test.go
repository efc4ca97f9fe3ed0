package agent

import (
	"bufio"
	"encoding/json"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// The queued replies of the synchronous channel (sync.go): a request sent
// with "queue" is answered at once when it can be, and otherwise queued,
// its reply coming on stdout under its own id. The agent decides which,
// by its busy memory, the target and the wait; these tests check each
// decision.

// stdoutLines runs an agent whose stdout the test reads, a line at a time.
type stdoutLines struct {
	a     *agent
	lines chan map[string]any
}

func newStdoutAgent(t *testing.T) *stdoutLines {
	t.Helper()
	r, w := io.Pipe()
	s := &stdoutLines{a: newAgent(w), lines: make(chan map[string]any, 64)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				s.lines <- m
			}
		}
	}()
	t.Cleanup(func() {
		s.a.shutdown()
		w.Close()
	})
	return s
}

// next is the next line the agent wrote on stdout.
func (s *stdoutLines) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-s.lines:
		return m
	case <-time.After(60 * time.Second): // a loaded machine, not a timing assertion
		t.Fatal("no reply on stdout")
		return nil
	}
}

// sync sends one request line on the synchronous channel's code.
func (s *stdoutLines) sync(t *testing.T, line string) *reply {
	t.Helper()
	req, bad := parseRequest([]byte(line))
	if bad != nil {
		t.Fatal(bad.Error.Message)
	}
	r, after := s.a.syncDispatch(req)
	if r == nil {
		t.Fatalf("%s: no reply", line)
	}
	if after != nil {
		after()
	}
	return r
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// heldElsewhere takes a new lock in this process, as another holder: the
// agent's acquisitions are locks of their own, which it excludes. It
// returns the target as JSON, and the lock.
func heldElsewhere(t *testing.T) (string, *hold.Lock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t")
	other, err := hold.TryAcquire(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Release() })
	return jsonString(path), other
}

// TestQueuedAcquire: a free lock is granted at once, on the channel; a
// busy one is tried once, then queued, and granted on stdout under the
// request's id when its holder lets go. The fast channel never blocks.
func TestQueuedAcquire(t *testing.T) {
	// The directory first, so that it is removed after the agent's
	// shutdown has let go of its locks (Windows removes no open file).
	target := jsonString(filepath.Join(t.TempDir(), "t"))
	s := newStdoutAgent(t)

	r := s.sync(t, `{"id":1,"op":"acquire","queue":true,"target":`+target+`}`)
	if !r.OK || r.Queued || r.Lock == 0 {
		t.Fatalf("acquire of a free lock: got %+v, want the lock at once", r)
	}
	held := r.Lock

	r = s.sync(t, `{"id":2,"op":"acquire","queue":true,"target":`+target+`}`)
	if !r.OK || !r.Queued || r.Lock != 0 {
		t.Fatalf("acquire of a busy lock: got %+v, want queued", r)
	}
	if r := s.sync(t, `{"id":3,"op":"release","queue":true,"lock":`+strconv.FormatUint(held, 10)+`}`); !r.OK || r.Queued {
		t.Fatalf("release of a local lock: got %+v, want ok at once", r)
	}
	m := s.next(t)
	if m["id"] != float64(2) || m["ok"] != true || m["lock"] == nil {
		t.Fatalf("queued acquire's reply on stdout: got %v, want id 2 with its lock", m)
	}
}

// TestQueuedBusyMemory: an acquire of a lock found busy a moment ago is
// queued without a try, even if the lock is free by now (its wait then
// takes it at once); once the memory has passed, it is tried again.
func TestQueuedBusyMemory(t *testing.T) {
	target, other := heldElsewhere(t)
	s := newStdoutAgent(t)
	if r := s.sync(t, `{"id":1,"op":"try","queue":true,"target":`+target+`}`); r.OK || r.Error.Code != codeBusy {
		t.Fatalf("try of a held lock: got %+v, want %s", r, codeBusy)
	}
	other.Release()

	r := s.sync(t, `{"id":2,"op":"acquire","queue":true,"target":`+target+`}`)
	if !r.Queued {
		t.Fatalf("acquire of a lock found busy a moment ago: got %+v, want queued", r)
	}
	m := s.next(t)
	if m["id"] != float64(2) || m["ok"] != true {
		t.Fatalf("its reply on stdout: got %v, want id 2, ok", m)
	}
	lock := strconv.FormatFloat(m["lock"].(float64), 'f', -1, 64)
	if r := s.sync(t, `{"id":3,"op":"release","queue":true,"lock":`+lock+`}`); !r.OK {
		t.Fatalf("release: %+v", r)
	}

	// Age the memory instead of sleeping through it.
	s.a.mu.Lock()
	for k := range s.a.busy {
		s.a.busy[k] = time.Now().Add(-2 * busyMemory)
	}
	s.a.mu.Unlock()
	if r := s.sync(t, `{"id":4,"op":"acquire","queue":true,"target":`+target+`}`); !r.OK || r.Queued || r.Lock == 0 {
		t.Fatalf("acquire once the busy memory passed: got %+v, want the lock at once", r)
	}
}

// TestQueuedNonblocking: a request that must not wait is answered on the
// channel, busy or not: a try, an acquire with wait 0, a release or check
// of no lock.
func TestQueuedNonblocking(t *testing.T) {
	target, _ := heldElsewhere(t)
	s := newStdoutAgent(t)
	busy := []string{
		`{"id":1,"op":"try","queue":true,"target":` + target + `}`,
		`{"id":2,"op":"acquire","queue":true,"wait":0,"target":` + target + `}`,
	}
	if runtime.GOOS != "windows" { // the fair queue is unix's
		busy = append(busy, `{"id":3,"op":"acquire","queue":true,"wait":0,"fair":true,"target":`+target+`}`)
	}
	for _, line := range busy {
		if r := s.sync(t, line); r.Queued || r.OK || r.Error.Code != codeBusy {
			t.Errorf("%s: got %+v, want %s at once", line, r, codeBusy)
		}
	}
	for _, line := range []string{
		`{"id":4,"op":"release","queue":true,"lock":99}`,
		`{"id":5,"op":"check","queue":true,"lock":99}`,
	} {
		if r := s.sync(t, line); r.Queued || r.OK || r.Error.Code != codeNoLock {
			t.Errorf("%s: got %+v, want %s at once", line, r, codeNoLock)
		}
	}
	if r := s.sync(t, `{"id":6,"op":"acquire","queue":true,"target":"","name":""}`); r.Queued || r.OK || r.Error.Code != codeInvalid {
		t.Errorf("acquire of nothing: got %+v, want %s at once", r, codeInvalid)
	}
}

// TestQueuedCancel: a queued wait is the standard channel's: its id
// cancels it there, and its EABORT comes on stdout.
func TestQueuedCancel(t *testing.T) {
	s := newStdoutAgent(t)
	target, _ := heldElsewhere(t)
	if r := s.sync(t, `{"id":"w","op":"acquire","queue":true,"target":`+target+`}`); !r.Queued {
		t.Fatalf("acquire of a held lock: got %+v, want queued", r)
	}
	s.a.handleLine([]byte(`{"id":"c","op":"cancel","request":"w"}`))
	got := map[string]map[string]any{}
	for len(got) < 2 {
		m := s.next(t)
		got[m["id"].(string)] = m
	}
	if got["c"]["cancelled"] != true {
		t.Errorf("cancel's reply: got %v, want cancelled", got["c"])
	}
	if e, _ := got["w"]["error"].(map[string]any); e["code"] != codeAbort {
		t.Errorf("the cancelled wait's reply: got %v, want %s", got["w"], codeAbort)
	}
}

// TestQueuedElsewhere: what the channel does not serve itself is queued
// when the request says so (a network target, a status) and routed, the
// client blocking, when it does not.
func TestQueuedElsewhere(t *testing.T) {
	s := newStdoutAgent(t)
	file := jsonString(filepath.Join(t.TempDir(), "f"))
	if r := s.sync(t, `{"id":1,"op":"status","queue":true,"target":`+file+`}`); !r.Queued {
		t.Fatalf("queued status: got %+v, want queued", r)
	}
	if m := s.next(t); m["id"] != float64(1) || m["status"] == nil {
		t.Fatalf("its reply on stdout: got %v, want id 1 with a status", m)
	}
	if r := s.sync(t, `{"id":2,"op":"status","target":`+file+`}`); r.Queued || r.Status == nil {
		t.Fatalf("status without queue: got %+v, want the status on the channel", r)
	}
	// Whatever serves it (a sub-agent, or none to be found), a network
	// target's reply comes on stdout.
	if r := s.sync(t, `{"id":3,"op":"try","queue":true,"target":"etcd://127.0.0.1:1/x"}`); !r.Queued {
		t.Fatalf("try of a network target: got %+v, want queued", r)
	}
	if m := s.next(t); m["id"] != float64(3) {
		t.Fatalf("its reply on stdout: got %v, want id 3", m)
	}
}

// TestHelloVersion: the hello answers the highest version both speak,
// and refuses a client older than minProtocolVersion.
func TestHelloVersion(t *testing.T) {
	s := newStdoutAgent(t)
	for _, c := range []struct{ client, want int }{
		{0, protocolVersion}, {1, 1}, {2, 2}, {protocolVersion + 5, protocolVersion},
	} {
		s.a.handleLine([]byte(`{"id":1,"op":"hello","version":` + strconv.Itoa(c.client) + `}`))
		if m := s.next(t); m["ok"] != true || m["version"] != float64(c.want) {
			t.Errorf("hello version %d: got %v, want version %d", c.client, m, c.want)
		}
	}
	s.a.handleLine([]byte(`{"id":1,"op":"hello","version":-1}`))
	if m := s.next(t); m["ok"] != false {
		t.Errorf("hello version -1: got %v, want EVERSION", m)
	}
}
