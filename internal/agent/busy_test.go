package agent

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
)

// TestAgentBusyMemory checks that a lock found busy is remembered by what
// the request asks for, not by the identity of a resolved request: a
// later request with equal options, parsed on its own (fields included),
// is known busy; one for the same lock in another mode is not.
func TestAgentBusyMemory(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	// Quoted as JSON: a Windows path's backslashes are escapes.
	jt, _ := json.Marshal(target)
	jsonTarget := string(jt)
	held, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	a := newAgent(io.Discard)
	defer a.shutdown()

	try := `{"id":1,"op":"try","target":` + jsonTarget + `,"fields":{"job":"x"}}`
	req, bad := parseRequest([]byte(try))
	if bad != nil {
		t.Fatal(bad.Error.Message)
	}
	if r, _ := a.syncDispatch(req); r.OK || r.Error.Code != codeBusy {
		t.Fatalf("try of a held lock: got %+v, want %s", r, codeBusy)
	}

	resolve := func(line string) bool {
		t.Helper()
		req, bad := parseRequest([]byte(line))
		if bad != nil {
			t.Fatal(bad.Error.Message)
		}
		spec, err := req.resolve()
		if err != nil {
			t.Fatal(err)
		}
		defer spec.Close()
		a.mu.Lock()
		defer a.mu.Unlock()
		_, ok := a.busy[spec.Key] // not recentlyBusy: no clock in this test
		return ok
	}
	again := strings.Replace(try, `"id":1`, `"id":2,"wait":5`, 1)
	if !resolve(again) {
		t.Errorf("a request equal to the busy one is not remembered busy")
	}
	shared := strings.Replace(try, `"id":1`, `"id":3,"shared":true`, 1)
	if resolve(shared) {
		t.Errorf("a shared request is remembered busy from an exclusive one")
	}
}
