//go:build unix

package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// syncClient is a client's end of the agent's synchronous channel.
type syncClient struct {
	t        *testing.T
	requests *os.File
	replies  *bufio.Reader
	dir      string // where the FIFOs were
}

// openSyncChannel asks the agent for its synchronous channel and opens it.
func openSyncChannel(t *testing.T, c *agentClient) *syncClient {
	t.Helper()
	return openSyncChannelWith(t, c, `"version":1`)
}

// openSyncChannelWith is openSyncChannel with the hello's other fields
// (its version, and "pipeline" for a client that writes releases ahead).
func openSyncChannelWith(t *testing.T, c *agentClient, hello string) *syncClient {
	t.Helper()
	r := wantOK(t, c.request(`{"id":"hello","op":"hello",`+hello+`,"sync":true}`))
	paths, _ := r["sync"].(map[string]any)
	reqPath, _ := paths["requests"].(string)
	repPath, _ := paths["replies"].(string)
	if reqPath == "" || repPath == "" || filepath.Dir(reqPath) != filepath.Dir(repPath) {
		t.Fatalf("hello with sync: %v", r)
	}
	for _, p := range []string{reqPath, repPath} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: want a FIFO only its owner can open, got %v, %v", p, fi, err)
		}
	}
	if fi, err := os.Stat(filepath.Dir(reqPath)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the FIFOs' directory: want mode 0700, got %v, %v", fi, err)
	}
	w, err := os.OpenFile(reqPath, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := os.Open(repPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); rd.Close() })
	return &syncClient{t: t, requests: w, replies: bufio.NewReader(rd), dir: filepath.Dir(reqPath)}
}

// request sends one line on the synchronous channel and reads its reply.
func (s *syncClient) request(line string) map[string]any {
	s.t.Helper()
	return s.within(hangLimit, line)
}

// TestAgentSyncChannel: a client that asks for the synchronous channel
// gets two private FIFOs, which go away once it has opened them; try,
// release and check are served there, on the same lock table as the
// standard channel; hello is refused with a reply that says where it goes.
func TestAgentSyncChannel(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	s := openSyncChannel(t, c)

	first := wantOK(t, s.request(`{"id":1,"op":"try","target":"t"}`))
	if first["path"] != "t.lock" || first["protocol"] != "flock" || first["token"] == nil || first["owner"] == nil {
		t.Fatalf("try: %v", first)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("the FIFOs' directory is still there after the first request: %v", err)
	}
	// The lock excludes, whichever channel asks.
	if msg := wantCode(t, s.request(`{"id":2,"op":"try","target":"t"}`), "EBUSY"); !strings.Contains(msg, fmt.Sprint("pid ", c.cmd.Process.Pid)) {
		t.Errorf("busy error does not name the holder: %s", msg)
	}
	wantCode(t, c.request(`{"id":3,"op":"try","target":"t"}`), "EBUSY")
	if _, err := hold.TryAcquire(filepath.Join(dir, "t")); err == nil {
		t.Fatal("the lock taken on the synchronous channel did not exclude another process's")
	}
	wantOK(t, s.request(fmt.Sprintf(`{"id":4,"op":"check","lock":%v}`, first["lock"])))
	// Released on the standard channel; a second release on either fails.
	wantOK(t, c.request(fmt.Sprintf(`{"id":5,"op":"release","lock":%v}`, first["lock"])))
	wantCode(t, s.request(fmt.Sprintf(`{"id":6,"op":"release","lock":%v}`, first["lock"])), "ENOLOCK")

	// Taken on the standard channel, released on the synchronous one.
	second := wantOK(t, c.request(`{"id":7,"op":"acquire","target":"t","wait":0}`))
	if second["token"].(float64) <= first["token"].(float64) {
		t.Fatalf("token did not grow: %v then %v", first["token"], second["token"])
	}
	wantOK(t, s.request(fmt.Sprintf(`{"id":8,"op":"release","lock":%v}`, second["lock"])))
	l, err := hold.TryAcquire(filepath.Join(dir, "t"))
	if err != nil {
		t.Fatalf("released on the synchronous channel, still locked: %v", err)
	}
	l.Release()

	for _, tc := range []struct{ req, code, says string }{
		{`{"id":10,"op":"hello","version":1}`, "EINVAL", "standard channel"},
		{`{"id":12,"op":"try","target":"t","protocol":"nope"}`, "EINVAL", "nope"},
		{`{"id":13,"op":"check","lock":999}`, "ENOLOCK", "999"},
		{`{"id":14,"op":`, "EINVAL", "malformed"},
	} {
		if msg := wantCode(t, s.request(tc.req), tc.code); !strings.Contains(msg, tc.says) {
			t.Errorf("%s: message %q does not say %q", tc.req, msg, tc.says)
		}
	}
	// The channel is still served, and so is the standard one.
	third := wantOK(t, s.request(`{"id":15,"op":"try","target":"d","protocol":"dir"}`))
	wantOK(t, s.request(fmt.Sprintf(`{"id":16,"op":"release","lock":%v}`, third["lock"])))
	wantOK(t, c.request(`{"id":17,"op":"status","target":"t"}`))

	// A lock held through the synchronous channel goes with the agent.
	wantOK(t, s.request(`{"id":18,"op":"try","target":"u"}`))
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	if l, err := hold.TryAcquire(filepath.Join(dir, "u")); err != nil {
		t.Fatalf("still locked after the agent exited: %v", err)
	} else {
		l.Release()
	}
	if _, err := s.replies.ReadByte(); err == nil {
		t.Error("the replies FIFO did not end with the agent")
	}
}

// TestAgentSyncPipelinedPolls: a client that writes its releases ahead
// (hello's "pipeline", the Node and Python packages' channel) is told the
// same polling budget as any other, more than none where there is more
// than one CPU: in a lock loop its replies then come to a thread that is
// awake, where sleeping threads woken three times a cycle cost both sides
// more. The cycle itself works as before: a release written ahead and
// the next try, sent together, are answered in order.
func TestAgentSyncPipelinedPolls(t *testing.T) {
	budgets := map[string]float64{}
	for _, hello := range []string{`"version":2`, `"version":4,"pipeline":true`} {
		c := startAgent(t, holdBin, t.TempDir())
		s := openSyncChannelWith(t, c, hello)
		first := wantOK(t, s.request(`{"id":1,"op":"try","target":"t","queue":true}`))
		spin, ok := first["spin_us"].(float64)
		if !ok {
			t.Fatalf("hello {%s}: the channel's first reply has no spin_us: %v", hello, first)
		}
		budgets[hello] = spin
		if strings.Contains(hello, "pipeline") {
			if _, err := s.requests.WriteString(fmt.Sprintf(`{"id":2,"op":"release","lock":%v,"queue":true,"sent":1}`+"\n", first["lock"])); err != nil {
				t.Fatal(err)
			}
			if r := s.request(`{"id":3,"op":"try","target":"t","queue":true}`); r["id"] != 2.0 || r["ok"] != true {
				t.Fatalf("the release written ahead: %v, want its success first", r)
			}
			if line, err := s.replies.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"id":3,"ok":true`) {
				t.Fatalf("the try after it: %s, %v: want the lock again", line, err)
			}
		}
		c.in.Close()
		c.waitExit()
	}
	pipelined, plain := budgets[`"version":4,"pipeline":true`], budgets[`"version":2`]
	if pipelined != plain {
		t.Errorf("a pipelined channel is told spin_us %v, a plain one %v: want the same budget", pipelined, plain)
	}
	if runtime.NumCPU() > 1 && pipelined <= 0 {
		t.Errorf("with %d CPUs a pipelined channel is told spin_us %v: want a budget to poll for", runtime.NumCPU(), pipelined)
	}
}

// TestAgentSyncChannelUnopened: an agent whose client asked for the
// synchronous channel but never opened it removes the FIFOs when it ends.
func TestAgentSyncChannelUnopened(t *testing.T) {
	c := startAgent(t, holdBin, t.TempDir())
	r := wantOK(t, c.request(`{"id":1,"op":"hello","version":1,"sync":true}`))
	reqPath := r["sync"].(map[string]any)["requests"].(string)
	if r := wantOK(t, c.request(`{"id":2,"op":"hello","version":1,"sync":true}`)); r["sync"] != nil {
		t.Errorf("a second channel was handed out: %v", r)
	}
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	if _, err := os.Stat(filepath.Dir(reqPath)); !os.IsNotExist(err) {
		t.Errorf("the FIFOs' directory outlived the agent: %v", err)
	}
}

// kernelLossPoll is how often the library looks at a watched kernel
// lock's file (lossPoll in internal/flock).
const kernelLossPoll = time.Second

// TestAgentKernelLockLost: a kernel lock whose lock file is removed while
// held is reported lost unasked, once.
func TestAgentKernelLockLost(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	r := wantOK(t, c.request(`{"id":1,"op":"acquire","target":"t"}`))
	kept := wantOK(t, c.request(`{"id":2,"op":"acquire","target":"k"}`))
	if err := os.Remove(filepath.Join(dir, "t.lock")); err != nil {
		t.Fatal(err)
	}
	ev := c.event("lost")
	if ev["lock"] != r["lock"] || ev["path"] != "t.lock" {
		t.Fatalf("lost event %v, want lock %v", ev, r["lock"])
	}
	if msg := wantCode(t, ev, "ELOST"); !strings.Contains(msg, "removed or replaced") {
		t.Errorf("lost event message %q does not say what happened", msg)
	}
	wantCode(t, c.request(fmt.Sprintf(`{"id":3,"op":"release","lock":%v}`, r["lock"])), "ELOST")
	wantOK(t, c.request(fmt.Sprintf(`{"id":4,"op":"check","lock":%v}`, kept["lock"])))
	c.pending("no second event", 2*kernelLossPoll+kernelLossPoll/2)
	for _, m := range c.held {
		if m["event"] != nil {
			t.Errorf("unexpected event %v", m)
		}
	}
}

// within runs s.request(line) and fails the test if no reply comes
// within d: a hang bound, not a timing assertion.
func (s *syncClient) within(d time.Duration, line string) map[string]any {
	s.t.Helper()
	done := make(chan map[string]any, 1)
	go func() {
		var m map[string]any
		got, err := func() ([]byte, error) {
			if _, err := s.requests.WriteString(line + "\n"); err != nil {
				return nil, err
			}
			return s.replies.ReadBytes('\n')
		}()
		if err == nil {
			err = json.Unmarshal(got, &m)
		}
		if err != nil {
			m = map[string]any{"ok": false, "error": map[string]any{"code": "TEST", "message": "the synchronous channel: " + err.Error()}}
		}
		done <- m
	}()
	select {
	case m := <-done:
		return m
	case <-time.After(d):
		s.t.Fatalf("no reply on the synchronous channel within %v to %s", d, line)
		return nil
	}
}

// TestAgentSyncWaits: the synchronous channel serves what may wait too.
// An acquire of a lock another process holds blocks until it is released;
// one of a lock this agent holds fails at once as a deadlock (the
// synchronous client is blocked and cannot release it), naming the
// holder; update with its commit, append and status are served there.
func TestAgentSyncWaits(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	s := openSyncChannel(t, c)

	other, err := hold.TryAcquire(filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		released <- time.Now()
		other.Release()
	}()
	got := wantOK(t, s.within(30*time.Second, `{"id":1,"op":"acquire","target":"w","wait":30}`))
	select {
	case <-released:
	default:
		t.Fatal("the acquire on the synchronous channel was granted while another process held the lock")
	}
	if got["path"] != "w.lock" {
		t.Fatalf("acquire: %v", got)
	}

	// Held by this agent: a deadlock, at once, whatever the wait.
	for _, req := range []string{
		`{"id":2,"op":"acquire","target":"w"}`,
		`{"id":3,"op":"acquire","target":"w","shared":true,"wait":60}`,
		`{"id":4,"op":"update","lock_file":"w.lock","target":"f"}`,
	} {
		msg := wantCode(t, s.within(2*time.Second, req), "EDEADLK")
		if !strings.Contains(msg, fmt.Sprint("pid ", c.cmd.Process.Pid)) || !strings.Contains(msg, "this very process") {
			t.Errorf("%s: deadlock message %q does not name the holder and say why", req, msg)
		}
	}
	wantOK(t, s.request(fmt.Sprintf(`{"id":5,"op":"release","lock":%v}`, got["lock"])))

	// update, commit, append, status.
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := wantOK(t, s.within(10*time.Second, `{"id":6,"op":"update","target":"f"}`))
	if u["data"] != "b2xk" { // "old"
		t.Fatalf("update: %v", u)
	}
	if r := wantOK(t, s.request(fmt.Sprintf(`{"id":7,"op":"commit","update":%v,"data":"bmV3"}`, u["update"]))); r["written"] != true {
		t.Fatalf("commit: %v", r)
	}
	wantOK(t, s.within(10*time.Second, `{"id":8,"op":"append","target":"f","data":"Kw=="}`))
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "new+" {
		t.Fatalf("file after update and append: %q", b)
	}
	st := wantOK(t, s.request(`{"id":9,"op":"status","target":"f"}`))
	if m, _ := st["status"].(map[string]any); m == nil || m["state"] != "free" {
		t.Fatalf("status: %v", st)
	}
	// The standard channel still works, and a sync reply never went there.
	wantOK(t, c.request(`{"id":10,"op":"status","target":"f"}`))
	for _, m := range c.held {
		if m["id"] != nil {
			t.Errorf("a reply reached the standard channel unasked: %v", m)
		}
	}
}

// TestAgentSyncDir: a client that names the directory for the FIFOs in
// its hello finds them there, ready, and the agent removes them and the
// directory once used.
func TestAgentSyncDir(t *testing.T) {
	c := startAgent(t, holdBin, t.TempDir())
	public := filepath.Join(t.TempDir(), "public")
	if err := os.Mkdir(public, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := wantOK(t, c.request(fmt.Sprintf(`{"id":1,"op":"hello","version":1,"sync":true,"sync_dir":%q}`, public))); r["sync"] != nil {
		t.Fatalf("a channel was made in a directory others may enter: %v", r)
	}
	c2 := startAgent(t, holdBin, t.TempDir())
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	r := wantOK(t, c2.request(fmt.Sprintf(`{"id":1,"op":"hello","version":1,"sync":true,"sync_dir":%q}`, private)))
	paths, _ := r["sync"].(map[string]any)
	if paths == nil || paths["requests"] != filepath.Join(private, "requests") || paths["replies"] != filepath.Join(private, "replies") {
		t.Fatalf("hello: %v", r)
	}
}
