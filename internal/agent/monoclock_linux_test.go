package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/portable"
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

var registerPortable sync.Once

// TestReleaseAheadAsksTheLock: a release may be written ahead for every
// lock that belongs to an open file (a kernel lock, fair or not, and a
// kernel semaphore's slot), and for no other (a portable lock, whose
// directory a program could look for once release returns): the agent
// asks the lock what it is, not its protocol's name.
func TestReleaseAheadAsksTheLock(t *testing.T) {
	// The hold command registers the portable protocol by name; this
	// test binary is not the command.
	registerPortable.Do(func() {
		lockspec.RegisterFixedProtocol("dir", "portable", portable.New())
	})
	_, requests, in := openTestSync(t, `"version":4,"pipeline":true`)
	dir := t.TempDir()
	for i, c := range []struct {
		name, fields string
		want         bool
	}{
		{"kernel", ``, true},
		{"fair", `,"fair":true`, true},
		{"slot", `,"slots":2`, true},
		{"portable", `,"protocol":"dir"`, false},
	} {
		target := filepath.Join(dir, c.name)
		fmt.Fprintf(requests, `{"id":%d,"op":"try","target":%s%s}`+"\n", i+1, jsonString(target), c.fields)
		line, err := in.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		if got["ok"] != true || (got["release_ahead"] == true) != c.want {
			t.Errorf("%s: try: %v, want release_ahead %v", c.name, got, c.want)
		}
	}
}
