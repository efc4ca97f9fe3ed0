//go:build unix

package fairq

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// sharedEnv asks the rw role for a shared (reader) hold.
const sharedEnv = "FAIRQ_TEST_SHARED"

// TestReadersTogetherWriterAlone: fair readers and writers in separate
// processes, queued in a known order behind a plain holder (r1 r2 w3 r4
// r5). Consecutive readers hold at once, the writer waits for every
// earlier reader and holds alone, and the readers queued after it wait for
// it (none slips past it while the earlier readers hold), then hold
// together.
func TestReadersTogetherWriterAlone(t *testing.T) { forDesigns(t, testReadersTogetherWriterAlone) }

func testReadersTogetherWriterAlone(t *testing.T, design string) {
	path := lockPath(t)
	out := filepath.Join(t.TempDir(), "log")
	main := holdMain(t, path)
	type rw struct {
		id     string
		shared bool
		stdin  io.WriteCloser
		done   chan error
	}
	all := []*rw{{id: "r1", shared: true}, {id: "r2", shared: true}, {id: "w3"}, {id: "r4", shared: true}, {id: "r5", shared: true}}
	for i, w := range all {
		shared := "0"
		if w.shared {
			shared = "1"
		}
		cmd := testenv.Command(roleEnv+"=rw", lockEnv+"="+path, idEnv+"="+w.id, outEnv+"="+out,
			designEnv+"="+design, sharedEnv+"="+shared)
		cmd.Stderr = &prefixWriter{t: t, prefix: w.id + ": "}
		var err error
		if w.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.done = make(chan error, 1)
		go func() { w.done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill(); <-w.done })
		// Queued before the next one starts: the order of arrival.
		waitFor(t, w.id+" queued", func() bool { return len(queued(t, design, path)) == i+1 })
	}
	logHas := func(lines ...string) func() bool {
		return func() bool {
			b, _ := os.ReadFile(out)
			got := strings.Split(string(b), "\n")
			for _, l := range lines {
				if !slices.Contains(got, l) {
					return false
				}
			}
			return true
		}
	}
	main.Release()
	waitFor(t, "r1 and r2 hold together", logHas("in r1", "in r2"))
	all[0].stdin.Close()
	all[1].stdin.Close()
	waitFor(t, "w3 holds", logHas("in w3"))
	all[2].stdin.Close()
	waitFor(t, "r4 and r5 hold together", logHas("in r4", "in r5"))
	all[3].stdin.Close()
	all[4].stdin.Close()
	for _, w := range all {
		if err := <-w.done; err != nil {
			t.Fatalf("%s: %v", w.id, err)
		}
		w.done <- nil
	}
	// Replay the log: a writer holds alone, a reader never beside a
	// writer, and nobody enters before everyone who must go first left.
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
	inside := map[string]bool{}
	for _, l := range lines {
		what, id, _ := strings.Cut(l, "_")
		if what == "out" {
			delete(inside, id)
			continue
		}
		for other := range inside {
			if strings.HasPrefix(id, "w") || strings.HasPrefix(other, "w") {
				t.Fatalf("%s entered while %s held the lock; log %q", id, other, lines)
			}
		}
		inside[id] = true
	}
	at := func(l string) int { return slices.Index(lines, strings.ReplaceAll(l, " ", "_")) }
	if at("in w3") < at("out r1") || at("in w3") < at("out r2") || at("in r4") < at("out w3") || at("in r5") < at("out w3") {
		t.Fatalf("out of arrival order: %q", lines)
	}
}

// rwRole takes the lock in fair mode, shared when asked, writes "in ID"
// to the output file, holds the lock until stdin closes, writes "out ID"
// and releases it.
func rwRole() int {
	path, id, out := os.Getenv(lockEnv), os.Getenv(idEnv), os.Getenv(outEnv)
	p := newProtocol(os.Getenv(designEnv))
	req := request(path)
	req.Shared = os.Getenv(sharedEnv) == "1"
	h, err := p.Acquire(context.Background(), req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 1
	}
	note := func(what string) error {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintf(f, "%s %s\n", what, id)
		return err
	}
	if err := note("in"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	io.Copy(io.Discard, os.Stdin)
	if err := note("out"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := h.Release(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		return 1
	}
	return 0
}
