//go:build unix

package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/portable"
)

// agentClient drives a `hold agent` process the way a client library does.
type agentClient struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser
	replies chan map[string]any // every line the agent writes, in order
	held    []map[string]any    // lines read while looking for another
}

// startAgent starts the hold binary named bin as an agent in dir.
func startAgent(t *testing.T, bin, dir string) *agentClient {
	t.Helper()
	return startAgentAs(t, bin, nil, dir)
}

// startAgentAs is startAgent with the agent run as the user and groups in
// cred (nil: as this process).
func startAgentAs(t *testing.T, bin string, cred *syscall.Credential, dir string) *agentClient {
	t.Helper()
	cmd := exec.Command(bin, "agent", "--for", t.Name())
	cmd.Dir = dir
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cmd.Stderr = os.Stderr
	in, out := testenv.StartPiped(t, cmd)
	c := &agentClient{t: t, cmd: cmd, in: in, replies: make(chan map[string]any, 100)}
	go func() {
		defer close(c.replies)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			c.replies <- m
		}
	}()
	t.Cleanup(func() {
		in.Close()
		if cmd.ProcessState == nil {
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(hangLimit):
				cmd.Process.Kill()
				<-done
			}
		}
	})
	return c
}

// send writes one raw line.
func (c *agentClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("writing to the agent: %v", err)
	}
}

// request sends req (a JSON object) and returns its reply.
func (c *agentClient) request(req string) map[string]any {
	c.t.Helper()
	var probe struct{ ID any }
	if err := json.Unmarshal([]byte(req), &probe); err != nil {
		c.t.Fatalf("bad test request %s: %v", req, err)
	}
	c.send(req)
	return c.reply(probe.ID)
}

// reply returns the reply with the given id (a float64 or a string, as
// JSON decodes it; nil for null), keeping other lines for later.
func (c *agentClient) reply(id any) map[string]any {
	c.t.Helper()
	return c.next(func(m map[string]any) bool {
		got, hasID := m["id"]
		return hasID && fmt.Sprint(got) == fmt.Sprint(id)
	}, fmt.Sprintf("the reply to id %v", id))
}

// event returns the next event named name.
func (c *agentClient) event(name string) map[string]any {
	c.t.Helper()
	return c.next(func(m map[string]any) bool { return m["event"] == name }, "a "+name+" event")
}

func (c *agentClient) next(match func(map[string]any) bool, what string) map[string]any {
	c.t.Helper()
	for i, m := range c.held {
		if match(m) {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return m
		}
	}
	deadline := time.After(hangLimit)
	for {
		select {
		case m, ok := <-c.replies:
			if !ok {
				c.t.Fatalf("the agent's output ended before %s (held: %v)", what, c.held)
			}
			if match(m) {
				return m
			}
			c.held = append(c.held, m)
		case <-deadline:
			c.t.Fatalf("no %s within %v (held: %v)", what, hangLimit, c.held)
		}
	}
}

// pending fails if a reply with id arrives within d.
func (c *agentClient) pending(id any, d time.Duration) {
	c.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-c.replies:
			if !ok {
				c.t.Fatal("the agent's output ended")
			}
			if fmt.Sprint(m["id"]) == fmt.Sprint(id) {
				c.t.Fatalf("request %v answered while it should wait: %v", id, m)
			}
			c.held = append(c.held, m)
		case <-timeout:
			return
		}
	}
}

// waitExit closes nothing; it waits for the agent to exit and returns its status.
func (c *agentClient) waitExit() int {
	c.t.Helper()
	for range c.replies { // drain, so the agent never blocks writing
	}
	return waitExit(c.t, c.cmd)
}

// wantOK fails unless r is a successful reply.
func wantOK(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	if r["ok"] != true {
		t.Fatalf("want ok, got %v", r)
	}
	return r
}

// wantCode fails unless r is an error reply with code; it returns the message.
func wantCode(t *testing.T, r map[string]any, code string) string {
	t.Helper()
	e, _ := r["error"].(map[string]any)
	if r["ok"] != false || e == nil || e["code"] != code {
		t.Fatalf("want error %s, got %v", code, r)
	}
	msg, _ := e["message"].(string)
	if msg == "" {
		t.Fatalf("error %s without a message: %v", code, r)
	}
	return msg
}

// TestAgentBadRequests: malformed JSON, unknown ops, unknown lock and
// update numbers, a double release and bad options each get an error
// reply with a code, and the agent keeps serving.
func TestAgentBadRequests(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	r := wantOK(t, c.request(`{"id":1,"op":"hello","version":1}`))
	if r["version"] != float64(1) || r["pid"] != float64(c.cmd.Process.Pid) {
		t.Fatalf("hello: %v", r)
	}

	c.send(`{"id":2,"op":`)
	wantCode(t, c.reply(nil), "EINVAL")
	c.send(`not json at all`)
	wantCode(t, c.reply(nil), "EINVAL")
	c.send(``) // blank lines are ignored
	c.send(`{"op":"hello"}`)
	wantCode(t, c.reply(nil), "EINVAL")
	c.send(`{"id":{"x":1},"op":"hello"}`)
	wantCode(t, c.reply(nil), "EINVAL")
	// A field of the wrong type is malformed; its id is still echoed.
	wantCode(t, c.request(`{"id":3,"op":"acquire","target":7}`), "EINVAL")

	for _, tc := range []struct{ req, code, in string }{
		{`{"id":10,"op":"fly"}`, "EINVAL", `unknown op "fly"`},
		{`{"id":11}`, "EINVAL", `without "op"`},
		{`{"id":12,"op":"release","lock":42}`, "ENOLOCK", "no lock 42"},
		{`{"id":13,"op":"check","lock":42}`, "ENOLOCK", "no lock 42"},
		{`{"id":14,"op":"commit","update":42,"data":""}`, "ENOLOCK", "no update 42"},
		{`{"id":15,"op":"abort","update":42}`, "ENOLOCK", "no update 42"},
		{`{"id":16,"op":"acquire"}`, "EINVAL", "no TARGET"},
		{`{"id":17,"op":"acquire","target":"t","wait":-1}`, "EINVAL", "wait"},
		{`{"id":18,"op":"acquire","name":"Bad/Name"}`, "EINVAL", "invalid lock name"},
		{`{"id":19,"op":"acquire","target":"t","protocol":"carrier-pigeon"}`, "EINVAL", "unknown protocol"},
		{`{"id":20,"op":"acquire","lock_file":"a","name":"b"}`, "EINVAL", "exclude each other"},
		{`{"id":21,"op":"acquire","target":"t","settings":{"color":"red"}}`, "EINVAL", `unknown setting "color"`},
		{`{"id":22,"op":"acquire","target":"t","fields":{"":"x"}}`, "EINVAL", "field"},
		{`{"id":23,"op":"update","target":"f","shared":true}`, "EINVAL", `update needs the file's lock alone, and "shared" lets other holders in`},
		{`{"id":35,"op":"update","target":"f","slots":4}`, "EINVAL", `update needs the file's lock alone, and "slots" (4) lets other holders in`},
		{`{"id":36,"op":"append","target":"f","data":"","shared":true}`, "EINVAL", `append needs the file's lock alone, and "shared"`},
		{`{"id":37,"op":"append","target":"f","data":"","slots":2}`, "EINVAL", `append needs the file's lock alone, and "slots" (2)`},
		{`{"id":24,"op":"append","target":"etcd://127.0.0.1:1/k","data":""}`, "EINVAL", "file path"},
		{`{"id":25,"op":"cancel"}`, "EINVAL", "request"},
		{`{"id":27,"op":"acquire","target":"no/such/dir/t"}`, "ENOENT", "no/such/dir/t.lock"},
	} {
		msg := wantCode(t, c.request(tc.req), tc.code)
		if !strings.Contains(msg, tc.in) {
			t.Errorf("%s: message %q does not mention %q", tc.req, msg, tc.in)
		}
	}

	// A lock released twice: the second release names no lock.
	r = wantOK(t, c.request(`{"id":30,"op":"acquire","target":"t"}`))
	n := r["lock"]
	wantOK(t, c.request(fmt.Sprintf(`{"id":31,"op":"check","lock":%v}`, n)))
	wantOK(t, c.request(fmt.Sprintf(`{"id":32,"op":"release","lock":%v}`, n)))
	wantCode(t, c.request(fmt.Sprintf(`{"id":33,"op":"release","lock":%v}`, n)), "ENOLOCK")
	r = wantOK(t, c.request(`{"id":34,"op":"cancel","request":999}`))
	if r["cancelled"] == true {
		t.Fatalf("cancel of nothing: %v", r)
	}
	wantOK(t, c.request(`{"id":"still-there","op":"hello"}`))
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d, want 0", code)
	}
}

// TestAgentLocksExclude: two acquisitions of one target by one client
// exclude each other as two processes do; a busy try and a timed-out or
// cancelled wait name the holder; the waiter gets the lock on release,
// with a larger fencing token.
func TestAgentLocksExclude(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	first := wantOK(t, c.request(`{"id":1,"op":"acquire","target":"t","fields":{"job":"one"}}`))
	if first["path"] != "t.lock" || first["protocol"] != "flock" {
		t.Fatalf("acquire: %v", first)
	}
	owner := first["owner"].(map[string]any)
	if owner["pid"] != float64(c.cmd.Process.Pid) || owner["fields"].(map[string]any)["job"] != "one" {
		t.Fatalf("owner record: %v", owner)
	}

	c.send(`{"id":2,"op":"acquire","target":"t"}`)
	c.pending(2, 300*time.Millisecond)

	pid := fmt.Sprint(c.cmd.Process.Pid)
	for _, tc := range []struct{ req, code string }{
		{`{"id":3,"op":"try","target":"t"}`, "EBUSY"},
		{`{"id":4,"op":"acquire","target":"t","wait":0}`, "EBUSY"},
		{`{"id":5,"op":"acquire","target":"t","wait":0.2}`, "ETIMEDOUT"},
	} {
		r := c.request(tc.req)
		msg := wantCode(t, r, tc.code)
		holder, _ := r["error"].(map[string]any)["holder"].(map[string]any)
		if !strings.Contains(msg, "pid "+pid) || holder == nil || fmt.Sprint(holder["pid"]) != pid {
			t.Errorf("%s: the error does not name the holder (pid %s): %v", tc.req, pid, r)
		}
	}
	c.send(`{"id":6,"op":"acquire","target":"t"}`)
	c.pending(6, 100*time.Millisecond)
	if r := wantOK(t, c.request(`{"id":7,"op":"cancel","request":6}`)); r["cancelled"] != true {
		t.Fatalf("cancel: %v", r)
	}
	if msg := wantCode(t, c.reply(6), "EABORT"); !strings.Contains(msg, "pid "+pid) {
		t.Errorf("abort does not name the holder: %s", msg)
	}

	st := wantOK(t, c.request(`{"id":8,"op":"status","target":"t"}`))["status"].(map[string]any)
	if st["state"] != "held exclusive" || st["token"] != first["token"] {
		t.Fatalf("status: %v", st)
	}
	wantOK(t, c.request(fmt.Sprintf(`{"id":9,"op":"release","lock":%v}`, first["lock"])))
	second := wantOK(t, c.reply(2))
	if second["token"].(float64) <= first["token"].(float64) {
		t.Fatalf("token did not grow: %v then %v", first["token"], second["token"])
	}
	if second["lock"] == first["lock"] {
		t.Fatalf("lock number reused: %v", second["lock"])
	}
}

// TestAgentEndOfInput: when its input ends, the agent abandons its waits,
// releases every lock (kernel and portable) and exits 0.
func TestAgentEndOfInput(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	wantOK(t, c.request(`{"id":1,"op":"acquire","target":"a"}`))
	wantOK(t, c.request(`{"id":2,"op":"acquire","target":"b","protocol":"dir"}`))
	wantOK(t, c.request(`{"id":3,"op":"acquire","target":"c","shared":true}`))
	c.send(`{"id":4,"op":"acquire","target":"a"}`) // waits for lock 1
	c.pending(4, 100*time.Millisecond)
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d, want 0", code)
	}
	for _, target := range []string{"a", "b", "c"} {
		opts := []hold.Option{}
		if target == "b" {
			opts = append(opts, hold.WithProtocol(portable.New()))
		}
		l, err := hold.TryAcquire(filepath.Join(dir, target), opts...)
		if err != nil {
			t.Fatalf("%s still locked after the agent exited: %v", target, err)
		}
		l.Release()
	}
}

// TestAgentClientVanishes: a client that writes half a request and
// vanishes, or sends requests and vanishes without reading the replies,
// leaves no lock behind and no agent running.
func TestAgentClientVanishes(t *testing.T) {
	dir := t.TempDir()
	t.Run("mid-line", func(t *testing.T) {
		c := startAgent(t, holdBin, dir)
		wantOK(t, c.request(`{"id":1,"op":"acquire","target":"t","protocol":"dir"}`))
		io.WriteString(c.in, `{"id":2,"op":"acquire","tar`)
		c.in.Close()
		if code := c.waitExit(); code != 0 {
			t.Fatalf("agent exit status %d, want 0", code)
		}
	})
	t.Run("unread replies", func(t *testing.T) {
		cmd := exec.Command(holdBin, "agent")
		cmd.Dir = dir
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Many requests whose replies nobody reads, then both pipes close:
		// the agent's writes fail, and it must neither die of SIGPIPE with
		// its locks held nor hang.
		var b strings.Builder
		b.WriteString(`{"id":0,"op":"acquire","target":"t","protocol":"dir"}` + "\n")
		for i := 1; i < 2000; i++ {
			fmt.Fprintf(&b, `{"id":%d,"op":"status","target":"t","protocol":"dir"}`+"\n", i)
		}
		go func() { io.WriteString(in, b.String()); in.Close() }()
		time.Sleep(200 * time.Millisecond)
		out.Close()
		if code := waitExit(t, cmd); code != 0 {
			t.Fatalf("agent exit status %d, want 0", code)
		}
	})
	l, err := hold.TryAcquire(filepath.Join(dir, "t"), hold.WithProtocol(portable.New()))
	if err != nil {
		t.Fatalf("lock left held: %v", err)
	}
	l.Release()
}

// TestAgentUpdate: the update exchange replaces the file atomically on
// commit, and writes nothing on abort, on unchanged content, or when the
// client leaves while holding the update.
func TestAgentUpdate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("one\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	c := startAgent(t, holdBin, dir)
	r := wantOK(t, c.request(`{"id":1,"op":"update","target":"f"}`))
	if r["data"] != "b25lCg==" || r["token"] == nil { // "one\n"
		t.Fatalf("update: %v", r)
	}
	// While the update holds the lock, nobody else gets it.
	wantCode(t, c.request(`{"id":2,"op":"try","target":"f"}`), "EBUSY")
	wantCode(t, c.request(fmt.Sprintf(`{"id":3,"op":"commit","update":%v}`, r["update"])), "EINVAL")
	if r := wantOK(t, c.request(fmt.Sprintf(`{"id":4,"op":"commit","update":%v,"data":"dHdvCg=="}`, r["update"]))); r["written"] != true {
		t.Fatalf("commit: %v", r)
	}
	if got := readFile(t, file); got != "two\n" {
		t.Fatalf("file = %q after commit", got)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after update, want 0640", st.Mode().Perm())
	}

	r = wantOK(t, c.request(`{"id":5,"op":"update","target":"f"}`))
	wantOK(t, c.request(fmt.Sprintf(`{"id":6,"op":"abort","update":%v}`, r["update"])))
	r = wantOK(t, c.request(`{"id":7,"op":"update","target":"f"}`))
	if r := wantOK(t, c.request(fmt.Sprintf(`{"id":8,"op":"commit","update":%v,"data":"dHdvCg=="}`, r["update"]))); r["written"] == true {
		t.Fatalf("unchanged content written: %v", r)
	}
	wantOK(t, c.request(`{"id":9,"op":"append","target":"f","data":"dGhyZWUK"}`))
	wantCode(t, c.request(`{"id":10,"op":"update","target":"missing","must_exist":true}`), "ENOENT")
	wantCode(t, c.request(`{"id":11,"op":"update","target":"."}`), "EISDIR")

	// The client leaves holding an update: nothing is written, the lock is free.
	wantOK(t, c.request(`{"id":12,"op":"update","target":"f"}`))
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	if got := readFile(t, file); got != "two\nthree\n" {
		t.Fatalf("file = %q", got)
	}
	l, err := hold.TryAcquire(file)
	if err != nil {
		t.Fatalf("update lock left held: %v", err)
	}
	l.Release()
}

// TestAgentUpdateHardLink: an update of a file with a second hard link is
// refused, file untouched, unless the request has allow_split: then the
// file is replaced and the other name keeps the old content. An append,
// which writes in place, needs no such field.
func TestAgentUpdateHardLink(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	c := startAgent(t, holdBin, dir)
	r := c.request(`{"id":1,"op":"update","target":"a"}`)
	wantCode(t, r, "EACCES")
	if hint, _ := r["error"].(map[string]any)["hint"].(string); !strings.Contains(hint, "allow_split") {
		t.Errorf("the refusal's hint does not name allow_split: %v", r)
	}
	if got, other := readFile(t, a), readFile(t, b); got != "old\n" || other != "old\n" {
		t.Fatalf("refused update changed a file: a %q, b %q", got, other)
	}
	// The lock was released with the refusal.
	wantOK(t, c.request(`{"id":2,"op":"append","target":"a","data":"YXBwZW5kZWQK"}`)) // "appended\n"

	r = wantOK(t, c.request(`{"id":3,"op":"update","target":"a","allow_split":true}`))
	if r["data"] != "b2xkCmFwcGVuZGVkCg==" { // "old\nappended\n"
		t.Fatalf("update with allow_split: %v", r)
	}
	if r := wantOK(t, c.request(fmt.Sprintf(`{"id":4,"op":"commit","update":%v,"data":"bmV3Cg=="}`, r["update"]))); r["written"] != true || r["warning"] != nil {
		t.Fatalf("commit: %v, want written and no warning", r)
	}
	if got, other := readFile(t, a), readFile(t, b); got != "new\n" || other != "old\nappended\n" {
		t.Errorf("after the split: a %q, b %q", got, other)
	}
}

// TestAgentUpdateEmpty: an empty commit is refused unless the update has
// allow_empty, as `hold update` refuses an empty filter output without
// --allow-empty: the refusal names the field, writes nothing and releases
// the lock; with the field the file is emptied.
func TestAgentUpdateEmpty(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startAgent(t, holdBin, dir)
	r := wantOK(t, c.request(`{"id":1,"op":"update","target":"f"}`))
	r = c.request(fmt.Sprintf(`{"id":2,"op":"commit","update":%v,"data":""}`, r["update"]))
	if msg := wantCode(t, r, "EIO"); !strings.Contains(msg, "empty") {
		t.Errorf("the refusal does not say the content is empty: %v", r)
	}
	if hint, _ := r["error"].(map[string]any)["hint"].(string); !strings.Contains(hint, "allow_empty") {
		t.Errorf("the refusal's hint does not name allow_empty: %v", r)
	}
	if got := readFile(t, file); got != "keep\n" {
		t.Fatalf("refused empty commit changed the file to %q", got)
	}
	// The lock was released with the refusal.
	wantOK(t, c.request(`{"id":3,"op":"append","target":"f","data":"YWRkZWQK"}`)) // "added\n"

	r = wantOK(t, c.request(`{"id":4,"op":"update","target":"f","allow_empty":true}`))
	if r := wantOK(t, c.request(fmt.Sprintf(`{"id":5,"op":"commit","update":%v,"data":""}`, r["update"]))); r["written"] != true {
		t.Fatalf("empty commit with allow_empty: %v, want written", r)
	}
	if got := readFile(t, file); got != "" {
		t.Errorf("after the empty commit with allow_empty the file holds %q", got)
	}
}

// TestAgentUpdateOwnerChange: an agent that runs as nobody, a member of the
// file's group, refuses to make another user's file its own, unless the
// update has allow_owner_change: then the file is replaced, keeps its
// group, and the commit's reply carries the warning `hold update` prints.
func TestAgentUpdateOwnerChange(t *testing.T) {
	needRootCLI(t, "files of another user, and the agent run as a third")
	bin := holdAsNobody(t)
	dir, file, member := otherUsersFile(t)
	c := startAgentAs(t, bin, member, dir)

	r := c.request(`{"id":1,"op":"update","target":"tracker"}`)
	if msg := wantCode(t, r, "EACCES"); !strings.Contains(msg, "uid 4242") {
		t.Errorf("the refusal does not name the owner: %v", r)
	}
	if hint, _ := r["error"].(map[string]any)["hint"].(string); !strings.Contains(hint, "allow_owner_change") {
		t.Errorf("the refusal's hint does not name allow_owner_change: %v", r)
	}
	if got := readFile(t, file); got != "v1\n" {
		t.Fatalf("refused update changed the file to %q", got)
	}

	r = wantOK(t, c.request(`{"id":2,"op":"update","target":"tracker","allow_owner_change":true}`))
	r = wantOK(t, c.request(fmt.Sprintf(`{"id":3,"op":"commit","update":%v,"data":"djIK"}`, r["update"]))) // "v2\n"
	if warning, _ := r["warning"].(string); r["written"] != true || !strings.Contains(warning, "now belongs to uid 65534") {
		t.Errorf("commit with allow_owner_change: %v, want written and a warning naming the new owner", r)
	}
	if got := readFile(t, file); got != "v2\n" {
		t.Fatalf("file = %q after the commit", got)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobodyID || st.Gid != otherGID {
		t.Errorf("owner %d:%d, want %d:%d (the group kept)", st.Uid, st.Gid, nobodyID, otherGID)
	}
}

// TestAgentLostEvent: a portable lock broken by force under the agent is
// reported to the client unasked, and its release then fails ELOST.
func TestAgentLostEvent(t *testing.T) {
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	r := wantOK(t, c.request(`{"id":1,"op":"acquire","target":"t","protocol":"dir"}`))
	if res := runHold(t, dir, "break", "--force", "--protocol", "dir", "t"); res.code != 0 {
		t.Fatalf("hold break: %d %s", res.code, res.stderr)
	}
	ev := c.event("lost")
	if ev["lock"] != r["lock"] {
		t.Fatalf("lost event for lock %v, want %v", ev["lock"], r["lock"])
	}
	wantCode(t, ev, "ELOST")
	wantCode(t, c.request(fmt.Sprintf(`{"id":2,"op":"check","lock":%v}`, r["lock"])), "ELOST")
	wantCode(t, c.request(fmt.Sprintf(`{"id":3,"op":"release","lock":%v}`, r["lock"])), "ELOST")
}

// TestAgentEtcd: the lean hold agent serves etcd:// targets through a
// hold-remote sub-agent, with its own lock numbers and request ids, and
// its end releases the network locks at once.
func TestAgentEtcd(t *testing.T) {
	addr := "etcd://" + startEtcd(t) + "/locks/agent"
	dir := t.TempDir()
	c := startAgent(t, holdBin, dir)
	local := wantOK(t, c.request(`{"id":"l","op":"acquire","target":"t"}`))
	first := wantOK(t, c.request(fmt.Sprintf(`{"id":"e1","op":"acquire","target":%q,"settings":{"ttl":"5"}}`, addr)))
	if first["protocol"] != "etcd" || first["lock"] == local["lock"] {
		t.Fatalf("etcd acquire: %v (local lock %v)", first, local["lock"])
	}
	msg := wantCode(t, c.request(fmt.Sprintf(`{"id":"e2","op":"try","target":%q}`, addr)), "EBUSY")
	if !strings.Contains(msg, "pid ") {
		t.Errorf("busy error does not name the holder: %s", msg)
	}
	c.send(fmt.Sprintf(`{"id":"e3","op":"acquire","target":%q}`, addr))
	c.pending("e3", 200*time.Millisecond)
	wantOK(t, c.request(`{"id":"e4","op":"cancel","request":"e3"}`))
	wantCode(t, c.reply("e3"), "EABORT")
	st := wantOK(t, c.request(fmt.Sprintf(`{"id":"e5","op":"status","target":%q}`, addr)))["status"].(map[string]any)
	if st["state"] != "held exclusive" {
		t.Fatalf("status: %v", st)
	}
	wantOK(t, c.request(fmt.Sprintf(`{"id":"e6","op":"check","lock":%v}`, first["lock"])))
	wantOK(t, c.request(fmt.Sprintf(`{"id":"e7","op":"release","lock":%v}`, first["lock"])))
	wantCode(t, c.request(fmt.Sprintf(`{"id":"e8","op":"release","lock":%v}`, first["lock"])), "ENOLOCK")
	second := wantOK(t, c.request(fmt.Sprintf(`{"id":"e9","op":"acquire","target":%q}`, addr)))
	if second["token"].(float64) <= first["token"].(float64) {
		t.Fatalf("token did not grow: %v then %v", first["token"], second["token"])
	}
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	// The sub-agent released the lock when its input ended: no lease to
	// wait out.
	if r := runHold(t, dir, "run", "-n", addr, "--", "true"); r.code != 0 {
		t.Fatalf("etcd lock still held after the agent exited: %d %s", r.code, r.stderr)
	}
}

// TestAgentSubAgentDies: when the sub-agent serving network targets dies,
// its locks are reported lost, their release answers ELOST, and the next
// network request starts a new sub-agent.
func TestAgentSubAgentDies(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to find the sub-agent")
	}
	addr := "etcd://" + startEtcd(t) + "/locks/sub"
	c := startAgent(t, holdBin, t.TempDir())
	r := wantOK(t, c.request(fmt.Sprintf(`{"id":1,"op":"acquire","target":%q,"settings":{"ttl":"4"}}`, addr)))
	sub := childrenOf(t, c.cmd.Process.Pid)
	if len(sub) != 1 {
		t.Fatalf("want one sub-agent, found children %v", sub)
	}
	if err := syscall.Kill(sub[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ev := c.event("lost")
	if ev["lock"] != r["lock"] {
		t.Fatalf("lost event for lock %v, want %v", ev["lock"], r["lock"])
	}
	wantCode(t, ev, "ELOST")
	wantCode(t, c.request(fmt.Sprintf(`{"id":2,"op":"release","lock":%v}`, r["lock"])), "ELOST")
	// The dead sub-agent's lease runs out after its TTL; a new sub-agent
	// then gets the lock.
	wantOK(t, c.request(fmt.Sprintf(`{"id":3,"op":"acquire","target":%q,"wait":20}`, addr)))
}

// childrenOf lists the pids whose parent is pid, from /proc.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid, self int
		if _, err := fmt.Sscanf(s[i+2:], "%s %d", &state, &ppid); err != nil || ppid != pid {
			continue
		}
		fmt.Sscanf(e.Name(), "%d", &self)
		kids = append(kids, self)
	}
	return kids
}
