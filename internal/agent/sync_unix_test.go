//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestHelloSpin: the hello's synchronous channel tells the client how
// long to poll for a reply: the agent's own polling budget, or 0 with one
// CPU.
func TestHelloSpin(t *testing.T) {
	if got := replySpin(1); got != 0 {
		t.Errorf("replySpin(1) = %d, want 0", got)
	}
	if got, want := replySpin(2), int(syncSpin.Microseconds()); got != want || got == 0 {
		t.Errorf("replySpin(2) = %d, want %d", got, want)
	}
	s := newStdoutAgent(t)
	dir := filepath.Join(t.TempDir(), "sync")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.a.handleLine([]byte(`{"id":1,"op":"hello","version":2,"sync":true,"sync_dir":` + jsonString(dir) + `}`))
	m := s.next(t)
	paths, _ := m["sync"].(map[string]any)
	if paths == nil || paths["spin_us"] != float64(replySpin(runtime.NumCPU())) {
		t.Fatalf("hello with sync: got %v, want spin_us %d", m, replySpin(runtime.NumCPU()))
	}
}
