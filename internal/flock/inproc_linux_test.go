package flock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// clientTake takes the lock as a client does with recipe r (see
// inproc.go): open, flock without waiting, fstat and stat compared to the
// recipe. It returns the descriptor, or -1 when the client would ask the
// agent instead.
func clientTake(t *testing.T, r *Recipe) int {
	t.Helper()
	fd, err := unix.Open(r.Path, r.Flags, 0)
	if err != nil {
		return -1
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		unix.Close(fd)
		return -1
	}
	var st, pst unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Lstat(r.Path, &pst) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 ||
		uint64(st.Dev) != r.Dev || st.Ino != r.Ino || st.Ctim.Nano() != r.Ctime || st.Size != r.Size ||
		uint64(pst.Dev) != r.Dev || pst.Ino != r.Ino {
		unix.Close(fd)
		return -1
	}
	return fd
}

// recipeOf takes the lock at path as the agent does for a client (the
// process's second exclusive hold, so its record is lazy) and returns the
// recipe the agent would hand out, after releasing it.
func recipeOf(t *testing.T, path string) *Recipe {
	t.Helper()
	var p Protocol
	for range 2 {
		h, err := p.TryAcquire(request(path, false))
		if err != nil {
			t.Fatal(err)
		}
		r, ok := RecipeFor(h.(*handle).File(), nil)
		h.Release()
		if ok {
			return r
		}
	}
	t.Fatal("no recipe for a lazy exclusive hold of a lock file holding a past record")
	return nil
}

// TestRecipeLockExcludesAndContinuesTokens: a lock taken with a recipe
// is the library's lock (a Go acquisition finds it busy, names the
// client's pid), its record written on its behalf carries the next token
// and names it, and after its erase the next holder's token is larger.
func TestRecipeLockExcludesAndContinuesTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	first := h.(*handle).Fence()
	h.Release()
	if _, ok := RecipeFor(nil, nil); ok {
		t.Fatal("a recipe for no file")
	}
	r := recipeOf(t, path)
	fd := clientTake(t, r)
	if fd < 0 {
		t.Fatal("the recipe did not take a free lock")
	}
	if _, err := p.TryAcquire(request(path, false)); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("a Go acquisition while the client holds the lock: %v, want ErrBusy", err)
	}
	w, err := WriteRecord(path, r.File, r.Ticket, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w.Owner.Fence <= first || w.Owner.PID != os.Getpid() {
		t.Fatalf("record written on behalf: fence %d (want > %d), pid %d", w.Owner.Fence, first, w.Owner.PID)
	}
	st, err := p.Inspect(path)
	if err != nil || st.Holder == nil || st.Holder.Owner == nil || st.Holder.Owner.Fence != w.Owner.Fence {
		t.Fatalf("Inspect while the client holds it: %+v, %v", st, err)
	}
	if err := EraseRecord(path, r.File, w.Owner.Fence, w.Record); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if fd := clientTake(t, r); fd >= 0 {
		unix.Close(fd)
		t.Fatal("the recipe took a lock file written since it was made")
	}
	h, err = p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.(*handle).Fence(); got <= w.Owner.Fence {
		t.Fatalf("token after the client's hold: %d, want > %d", got, w.Owner.Fence)
	}
	h.Release()
}

// TestRecordOnlyForTheHolder: a record, and with it a token, is written
// on a client's behalf only while the process its ticket names holds the
// lock file: not before it took the lock, not for another live process
// that names itself in the ticket, and not after it let go; and a refusal
// leaves the file as it was.
func TestRecordOnlyForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	r := recipeOf(t, path)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, ticket []byte) {
		t.Helper()
		if _, err := WriteRecord(path, r.File, ticket, time.Now()); !errors.Is(err, lock.ErrNoToken) {
			t.Errorf("record %s: %v, want ErrNoToken", what, err)
		}
		if got, _ := os.ReadFile(path); string(got) != string(before) {
			t.Errorf("record %s changed the lock file: %q, was %q", what, got, before)
		}
	}
	refused("before the client took the lock", r.Ticket)

	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skipf("no process to name: %v", err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	o, ok := lock.DecodeOwner(r.Ticket)
	if !ok || o == nil {
		t.Fatal("the recipe's ticket is not an owner record")
	}
	o.PID = other.Process.Pid
	fd := clientTake(t, r)
	if fd < 0 {
		t.Fatal("the recipe did not take a free lock")
	}
	refused("for a live process that does not hold the lock", o.AppendEncode(nil))
	w, err := WriteRecord(path, r.File, r.Ticket, time.Now())
	if err != nil {
		t.Fatalf("record for the holder: %v", err)
	}
	if err := EraseRecord(path, r.File, w.Owner.Fence, w.Record); err != nil {
		t.Fatal(err)
	}
	if before, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	refused("after the client let go", r.Ticket)
}

// TestRecipeRefusesReplacedFile: a lock file renamed over since the
// recipe was made is never locked with it, and a hold whose file is
// replaced while held is found lost.
func TestRecipeRefusesReplacedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.lock")
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	h.(*handle).Fence()
	h.Release()
	r := recipeOf(t, path)
	fd := clientTake(t, r)
	if fd < 0 {
		t.Fatal("the recipe did not take a free lock")
	}
	if err := CheckHeld(path, r.File); err != nil {
		t.Fatalf("check of a held file: %v", err)
	}
	if !HeldIn(path, []File{r.File}) || HeldIn(path, []File{{r.Dev, r.Ino + 1}}) {
		t.Fatal("HeldIn does not tell the held file")
	}
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path+".new", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if err := CheckHeld(path, r.File); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("check of a replaced file: %v, want ErrLost", err)
	}
	if _, err := WriteRecord(path, r.File, r.Ticket, time.Now()); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("record of a replaced file: %v, want ErrLost", err)
	}
	unix.Close(fd)
	if fd := clientTake(t, r); fd >= 0 {
		unix.Close(fd)
		t.Fatal("the recipe took the file that replaced its own")
	}
}

// TestNoRecipeForWhatTheLibraryJudges: a shared hold, and a hold whose
// record is written, get no recipe.
func TestNoRecipeForWhatTheLibraryJudges(t *testing.T) {
	dir := t.TempDir()
	var p Protocol
	warm, err := p.TryAcquire(request(filepath.Join(dir, "warm.lock"), false))
	if err != nil {
		t.Fatal(err)
	}
	warm.Release()
	empty := filepath.Join(dir, "empty.lock")
	h, err := p.TryAcquire(request(empty, false))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	h, err = p.TryAcquire(request(empty, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := RecipeFor(h.(*handle).File(), nil); ok {
		t.Error("a recipe for a shared hold")
	}
	h.Release()
	h, err = p.TryAcquire(request(empty, false))
	if err != nil {
		t.Fatal(err)
	}
	h.(*handle).Fence() // the record is written: nothing lazy is left
	if _, ok := RecipeFor(h.(*handle).File(), nil); ok {
		t.Error("a recipe for a hold whose record is written")
	}
	h.Release()
}
