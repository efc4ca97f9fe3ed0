package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A release written ahead reports the losses the agent heard of before the
// client let go (request.Sent), and only those: a lock file the client
// removes after its release, before the agent reads the release, is no
// failure of that release. Without Sent's rule, the first release below
// failed with ELOST.
func TestReleaseAheadReportsLossesBeforeIt(t *testing.T) {
	s, requests, in := openTestSync(t, `"version":4,"pipeline":true`)
	read := func() map[string]any {
		t.Helper()
		line, err := in.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	dir := t.TempDir()
	for i, c := range []struct {
		name      string
		lostFirst bool // the client let go after the agent heard of the loss
		wantOK    bool
	}{
		{"let go before the loss was heard of", false, true},
		{"let go after the loss was heard of", true, false},
	} {
		target := filepath.Join(dir, fmt.Sprint("t", i))
		id := 10 * (i + 1)
		fmt.Fprintf(requests, `{"id":%d,"op":"try","target":%s,"queue":true}`+"\n", id, jsonString(target))
		got := read()
		if got["ok"] != true || got["release_ahead"] != true {
			t.Fatalf("%s: try: %v", c.name, got)
		}
		sent := monoNow()
		if err := os.Remove(target + ".lock"); err != nil {
			t.Fatal(err)
		}
		// The agent's watch finds the loss (it looks once a second) and
		// says so on the standard channel.
		deadline := time.Now().Add(30 * time.Second)
		for {
			m := s.next(t)
			if m["event"] == "lost" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no lost event", c.name)
			}
		}
		if c.lostFirst {
			sent = monoNow()
		}
		fmt.Fprintf(requests, `{"id":%d,"op":"release","lock":%v,"queue":true,"sent":%d}`+"\n", id+1, got["lock"], sent)
		r := read()
		if (r["ok"] == true) != c.wantOK {
			t.Errorf("%s: release: %v, want ok %v", c.name, r, c.wantOK)
		}
	}
}
