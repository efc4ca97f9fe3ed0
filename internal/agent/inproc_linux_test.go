package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// syncReply serves line on the synchronous channel's code.
func syncReply(t *testing.T, a *agent, line string) *reply {
	t.Helper()
	req, bad := parseRequest([]byte(line))
	if bad != nil {
		t.Fatalf("%s: %s", line, bad.Error.Message)
	}
	r, after := a.syncDispatch(req)
	if after != nil {
		after()
	}
	if r == nil {
		t.Fatalf("%s: no reply", line)
	}
	return r
}

// TestRecipeOnlyForPlainKernelLocks: a lazy request that asks for one
// gets a recipe for a plain exclusive kernel lock, and none for a shared,
// fair or semaphore one, nor without asking; a wait of the client's for a
// lock it holds with the recipe fails at once as a deadlock; its record,
// check and erase are served on its behalf.
func TestRecipeOnlyForPlainKernelLocks(t *testing.T) {
	// The client is this test process, which takes the lock with the
	// recipe itself below: a record is written only for the process that
	// holds the lock (flock.WriteRecord), which the agent's parent, the
	// test runner, does not.
	self := proc.Self()
	oldClient, oldPID := client, clientPID
	client, clientPID = func() *lock.Owner { return &self }, os.Getpid
	t.Cleanup(func() { client, clientPID = oldClient, oldPID })
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	jt, _ := json.Marshal(target)
	s := newStdoutAgent(t)
	a := s.a
	id := 0
	take := func(extra string) *reply {
		t.Helper()
		id++
		r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"try","target":%s%s}`, id, jt, extra))
		if !r.OK {
			t.Fatalf("try %s: %+v", extra, r.Error)
		}
		id++
		if rr := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"release","lock":%d}`, id, r.Lock)); !rr.OK {
			t.Fatalf("release: %+v", rr.Error)
		}
		return r
	}
	take(`,"lazy":true,"inproc":true`) // a process's first exclusive hold writes its record at once
	var recipe *flock.Recipe
	for range 2 {
		if recipe = take(`,"lazy":true,"inproc":true`).Recipe; recipe != nil {
			break
		}
	}
	if recipe == nil {
		t.Fatal("no recipe for a plain lazy kernel lock")
	}
	for _, extra := range []string{`,"lazy":true`, `,"inproc":true`, `,"lazy":true,"inproc":true,"shared":true`,
		`,"lazy":true,"inproc":true,"fair":true`, `,"lazy":true,"inproc":true,"slots":2`} {
		if r := take(extra); r.Recipe != nil {
			t.Errorf("a recipe for a request with %s", extra)
		}
	}
	take(`,"lazy":true,"inproc":true`)

	fd, err := unix.Open(recipe.Path, recipe.Flags, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	held, _ := json.Marshal([]heldFile{{Path: recipe.Path, File: recipe.File}})
	// A try never waits: busy, as for any holder. A wait is queued (the
	// try before it found the lock busy) and fails as a deadlock: the
	// library's check (proc.WithCallerKeeps), not the agent's.
	id++
	if r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"try","target":%s,"held_inproc":%s}`, id, jt, held)); r.OK || r.Error == nil || r.Error.Code != codeBusy {
		t.Errorf("a try of a lock the client holds in its process: %+v, want %s", r.Error, codeBusy)
	}
	id++
	if r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"acquire","wait":60,"queue":true,"target":%s,"held_inproc":%s}`, id, jt, held)); !r.Queued {
		t.Errorf("a wait for a lock the client holds in its process: %+v %+v, want queued", r, r.Error)
	} else if m := s.next(t); m["id"] != float64(id) || m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "EDEADLK") {
		t.Errorf("a wait for a lock the client holds in its process: %v, want EDEADLK", m)
	}
	file, _ := json.Marshal(recipe.File)
	ticket, _ := json.Marshal(recipe.Ticket)
	pathJSON, _ := json.Marshal(recipe.Path)
	fields := fmt.Sprintf(`"path":%s,%s`, pathJSON, string(file[1:len(file)-1]))
	id++
	r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"inproc_record",%s,"ticket":%s,"started_ns":1}`, id, fields, ticket))
	if !r.OK || r.Token == 0 || r.Owner == nil || r.Owner.PID != clientPID() || len(r.Data) == 0 {
		t.Fatalf("record on the client's behalf: %+v %+v", r, r.Error)
	}
	id++
	if r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"inproc_check",%s}`, id, fields)); !r.OK {
		t.Errorf("check of a held file: %+v", r.Error)
	}
	data, _ := json.Marshal(r.Data)
	id++
	if r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"inproc_erase",%s,"record_token":%d,"data":%s}`, id, fields, r.Token, data)); !r.OK {
		t.Errorf("erase: %+v", r.Error)
	}
	id++
	if r := syncReply(t, a, fmt.Sprintf(`{"id":%d,"op":"inproc_check","path":%s}`, id, pathJSON)); r.OK || r.Error.Code != codeInvalid {
		t.Errorf("check without the file's identity: %+v", r)
	}
}
