//go:build unix

package agent

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSyncSpin: the synchronous channel's first reply tells the client
// how long to poll for a reply (replySpinBudget, or 0 with one CPU); later replies do not repeat it.
func TestSyncSpin(t *testing.T) {
	if got := replySpin(1); got != 0 {
		t.Errorf("replySpin(1) = %d, want 0", got)
	}
	if got, want := replySpin(2), int(replySpinBudget.Microseconds()); got != want || got == 0 {
		t.Errorf("replySpin(2) = %d, want %d", got, want)
	}
	s := newStdoutAgent(t)
	dir := filepath.Join(t.TempDir(), "sync")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.a.handleLine([]byte(`{"id":1,"op":"hello","version":2,"sync":true,"sync_dir":` + jsonString(dir) + `}`))
	if m := s.next(t); m["sync"] == nil {
		t.Fatalf("hello with sync: got %v, want the channel", m)
	}
	// The agent holds both FIFOs open: neither open blocks.
	requests, err := os.OpenFile(filepath.Join(dir, requestsFIFO), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer requests.Close()
	replies, err := os.Open(filepath.Join(dir, repliesFIFO))
	if err != nil {
		t.Fatal(err)
	}
	defer replies.Close()
	in := bufio.NewReader(replies)
	want := replySpin(runtime.NumCPU())
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
}
