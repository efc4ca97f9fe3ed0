//go:build unix

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentLazyAcquisition checks protocol 3's lazy acquisition against
// a real agent: its reply carries the lock but neither token nor owner
// record; a token request hands out the token with the record that backs
// it (on disk, naming the client, before the reply), and tokens keep
// rising across lazy and eager acquisitions; a hello of an older version
// is still served, and an acquisition without "lazy" still carries both.
func TestAgentLazyAcquisition(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	c := startAgent(t, holdBin, dir)
	if r := wantOK(t, c.request(`{"id":0,"op":"hello","version":3}`)); r["version"] != 3.0 {
		t.Fatalf("hello for version 3: %v", r)
	}
	eager := wantOK(t, c.request(fmt.Sprintf(`{"id":1,"op":"acquire","target":%q}`, target)))
	first, ok := eager["token"].(float64)
	if !ok || first <= 0 || eager["owner"] == nil {
		t.Fatalf("an acquisition without lazy lacks its token or record: %v", eager)
	}
	wantOK(t, c.request(fmt.Sprintf(`{"id":2,"op":"release","lock":%v}`, eager["lock"])))

	lazy := wantOK(t, c.request(fmt.Sprintf(`{"id":3,"op":"acquire","target":%q,"lazy":true}`, target)))
	if _, has := lazy["token"]; has {
		t.Errorf("a lazy acquisition's reply carries a token: %v", lazy)
	}
	if _, has := lazy["owner"]; has {
		t.Errorf("a lazy acquisition's reply carries an owner record: %v", lazy)
	}
	if lazy["lock"] == nil || lazy["path"] != target+".lock" || lazy["protocol"] != "flock" {
		t.Fatalf("a lazy acquisition's reply lacks the lock: %v", lazy)
	}
	tok := wantOK(t, c.request(fmt.Sprintf(`{"id":4,"op":"token","lock":%v}`, lazy["lock"])))
	second, _ := tok["token"].(float64)
	owner, _ := tok["owner"].(map[string]any)
	if second <= first || owner == nil {
		t.Fatalf("token request after a token of %v: %v", first, tok)
	}
	// The record is on disk by the time the token is handed out.
	raw, err := os.ReadFile(target + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"fence":%d`, int64(second)); !strings.Contains(string(raw), want) {
		t.Errorf("the lock file holds %q, not the record of token %v (%s)", raw, second, want)
	}
	if again := wantOK(t, c.request(fmt.Sprintf(`{"id":5,"op":"token","lock":%v}`, lazy["lock"]))); again["token"] != tok["token"] {
		t.Errorf("a second token request: %v, want the first's %v", again["token"], tok["token"])
	}
	st := wantOK(t, c.request(fmt.Sprintf(`{"id":6,"op":"status","target":%q}`, target)))["status"].(map[string]any)
	if st["token"] != tok["token"] {
		t.Errorf("status reports token %v, the token request %v", st["token"], tok["token"])
	}
	wantOK(t, c.request(fmt.Sprintf(`{"id":7,"op":"release","lock":%v}`, lazy["lock"])))
	if r := c.request(fmt.Sprintf(`{"id":8,"op":"token","lock":%v}`, lazy["lock"])); r["ok"] == true {
		t.Errorf("a token request for a released lock succeeded: %v", r)
	}

	// A lazy hold released unasked hands out no token; the next one's
	// is still above every token handed out.
	short := wantOK(t, c.request(fmt.Sprintf(`{"id":9,"op":"acquire","target":%q,"lazy":true}`, target)))
	wantOK(t, c.request(fmt.Sprintf(`{"id":10,"op":"release","lock":%v}`, short["lock"])))
	last := wantOK(t, c.request(fmt.Sprintf(`{"id":11,"op":"acquire","target":%q}`, target)))
	if third, _ := last["token"].(float64); third <= second {
		t.Errorf("token %v after a token of %v", third, second)
	}

	old := startAgent(t, holdBin, dir)
	if r := wantOK(t, old.request(`{"id":0,"op":"hello","version":2}`)); r["version"] != 2.0 {
		t.Errorf("hello for version 2: %v", r)
	}
}
