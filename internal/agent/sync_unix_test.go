//go:build unix

package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSyncSpin: the synchronous channel's first reply tells the client
// how long to poll for a reply (replySpinBudget, or 0 with one CPU); later
// replies do not repeat it. A pipelined client (hello's "pipeline",
// version 4) is told the same budget: both sides poll on its channel too
// (syncChannel.pipelined).
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
		{`"version":4,"pipeline":true`, replySpin(runtime.NumCPU())},
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

// TestSyncReleaseAheadReplies: on a pipelined channel, the reply to a
// release written ahead ("sent") goes out with the reply after it, in one
// write, so that a client that wrote both before the agent read them is
// woken once; and it still comes at once when nothing follows it (the
// agent writes it before it waits for the next request), for a client
// that reads it without sending anything (before a request on the
// standard channel, or as it exits).
func TestSyncReleaseAheadReplies(t *testing.T) {
	_, requests, _ := openTestSync(t, `"version":4,"pipeline":true`)
	// The replies raw, to see how they were written: a FIFO read returns
	// what one write put there, and more only if more was written before.
	replies, err := os.Open(filepath.Join(filepath.Dir(requests.Name()), repliesFIFO))
	if err != nil {
		t.Fatal(err)
	}
	defer replies.Close()
	buf := make([]byte, 64<<10)
	readRaw := func() string {
		t.Helper()
		// Bounded only to catch a reply that never comes.
		replies.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := replies.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	target := jsonString(filepath.Join(t.TempDir(), "t"))
	try := func(id int) string {
		return fmt.Sprintf(`{"id":%d,"op":"try","target":%s,"lazy":true,"queue":true}`+"\n", id, target)
	}
	if _, err := requests.WriteString(try(2)); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Lock uint64 `json:"lock"`
	}
	if err := json.Unmarshal([]byte(readRaw()), &r); err != nil || r.Lock == 0 {
		t.Fatalf("try: %+v, %v", r, err)
	}
	// The release and the next try in one write: the agent reads them
	// together, and answers both in one write.
	release := fmt.Sprintf(`{"id":3,"op":"release","lock":%d,"queue":true,"sent":%d}`+"\n", r.Lock, monoNow())
	if _, err := requests.WriteString(release + try(4)); err != nil {
		t.Fatal(err)
	}
	got := readRaw()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2 || lines[0] != `{"id":3,"ok":true}` || !strings.HasPrefix(lines[1], `{"id":4,"ok":true,`) {
		t.Fatalf("one read after a release written ahead and a try: %q, want both replies, the release's first", got)
	}
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil {
		t.Fatal(err)
	}
	// A release with nothing after it: its reply comes all the same.
	release = fmt.Sprintf(`{"id":5,"op":"release","lock":%d,"queue":true,"sent":%d}`+"\n", r.Lock, monoNow())
	if _, err := requests.WriteString(release); err != nil {
		t.Fatal(err)
	}
	if got := readRaw(); got != `{"id":5,"ok":true}`+"\n" {
		t.Fatalf("a release written ahead, alone: %q, want its reply", got)
	}
}

// TestReplyBatch: replies held back go out with the next reply written,
// in one write; flush writes them alone; too many held back are written
// before they pass what one write keeps whole.
func TestReplyBatch(t *testing.T) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	buf := make([]byte, 1<<16)
	read := func() string {
		n, err := unix.Read(p[0], buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return ""
			}
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	w := &replyBatch{fd: p[1]}
	if err := w.hold([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "" {
		t.Fatalf("a reply held back was written: %q", got)
	}
	if err := w.write([]byte("b\n")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "a\nb\n" {
		t.Fatalf("held back, then written: one read gave %q, want both", got)
	}
	w.hold([]byte("c\n"))
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "c\n" {
		t.Fatalf("flush: %q", got)
	}
	if err := w.flush(); err != nil || read() != "" {
		t.Fatalf("an empty flush wrote something, or failed: %v", err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	total := 0
	for total < heldMax {
		if err := w.hold(line); err != nil {
			t.Fatal(err)
		}
		total += len(line)
	}
	if got := read(); len(got) != total || len(got) > heldMax+len(line) {
		t.Fatalf("after holding %d bytes back: %d written, want all of them in one write", total, len(got))
	}
}
