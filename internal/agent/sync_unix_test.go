//go:build unix

package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSyncSpin: the synchronous channel's first reply tells the client
// how long to poll for a reply (replySpinBudget, or 0 with one CPU); later
// replies do not repeat it. A pipelined client (hello's "pipeline",
// version 4) is told 0 whatever the CPUs: neither side polls for it.
func TestSyncSpin(t *testing.T) {
	if got := replySpin(1); got != 0 {
		t.Errorf("replySpin(1) = %d, want 0", got)
	}
	if got, want := replySpin(2), int(replySpinBudget.Microseconds()); got != want || got == 0 {
		t.Errorf("replySpin(2) = %d, want %d", got, want)
	}
	for _, c := range []struct {
		hello string
		want  int
	}{
		{`"version":2`, replySpin(runtime.NumCPU())},
		{`"version":4,"pipeline":true`, 0},
	} {
		t.Run(c.hello, func(t *testing.T) {
			s, requests, in := openTestSync(t, c.hello)
			if s.a.sync.pipelined != strings.Contains(c.hello, "pipeline") {
				t.Errorf("hello {%s}: channel pipelined = %v", c.hello, s.a.sync.pipelined)
			}
			want := c.want
			for i, w := range []*int{&want, nil} {
				if _, err := requests.WriteString(`{"id":2,"op":"check","lock":7}` + "\n"); err != nil {
					t.Fatal(err)
				}
				line, err := in.ReadBytes('\n')
				if err != nil {
					t.Fatal(err)
				}
				var r struct {
					Spin *int `json:"spin_us"`
				}
				if err := json.Unmarshal(line, &r); err != nil {
					t.Fatal(err)
				}
				switch {
				case w == nil && r.Spin != nil:
					t.Errorf("reply %d: %s, want no spin_us", i+1, line)
				case w != nil && (r.Spin == nil || *r.Spin != *w):
					t.Errorf("reply %d: %s, want spin_us %d", i+1, line, *w)
				}
			}
		})
	}
}

// TestSyncPipelinedRelease: a client that writes a release and the next
// acquire without reading between them gets both replies, in order, the
// release's first; the lock is free again by the acquire.
func TestSyncPipelinedRelease(t *testing.T) {
	s, requests, in := openTestSync(t, `"version":4,"pipeline":true`)
	target := jsonString(filepath.Join(t.TempDir(), "t"))
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
	if _, err := requests.WriteString(`{"id":2,"op":"try","target":` + target + `,"queue":true}` + "\n"); err != nil {
		t.Fatal(err)
	}
	first := read()
	if first["ok"] != true || first["release_ahead"] != true {
		t.Fatalf("try: %v, want a kernel lock whose release may be written ahead", first)
	}
	lines := fmt.Sprintf(`{"id":3,"op":"release","lock":%v,"queue":true}`+"\n"+`{"id":4,"op":"try","target":%s,"queue":true}`+"\n", first["lock"], target)
	if _, err := requests.WriteString(lines); err != nil {
		t.Fatal(err)
	}
	if r := read(); r["id"] != 3.0 || r["ok"] != true {
		t.Fatalf("release written ahead: %v, want its success first", r)
	}
	if r := read(); r["id"] != 4.0 || r["ok"] != true || r["lock"] == first["lock"] {
		t.Fatalf("try after the release: %v, want a new lock", r)
	}
	_ = s
}

// openTestSync starts an agent whose hello has the fields hello, and opens
// the client's ends of its synchronous channel.
func openTestSync(t *testing.T, hello string) (*stdoutLines, *os.File, *bufio.Reader) {
	t.Helper()
	s := newStdoutAgent(t)
	dir := filepath.Join(t.TempDir(), "sync")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.a.handleLine([]byte(`{"id":1,"op":"hello",` + hello + `,"sync":true,"sync_dir":` + jsonString(dir) + `}`))
	if m := s.next(t); m["sync"] == nil {
		t.Fatalf("hello with sync: got %v, want the channel", m)
	}
	// The agent holds both FIFOs open: neither open blocks.
	requests, err := os.OpenFile(filepath.Join(dir, requestsFIFO), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { requests.Close() })
	replies, err := os.Open(filepath.Join(dir, repliesFIFO))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replies.Close() })
	return s, requests, bufio.NewReader(replies)
}
