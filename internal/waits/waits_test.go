package waits

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// TestPublishListRemove: an entry is listed, whole, until it is removed;
// one of a dead waiter is not listed, and is removed by the listing.
func TestPublishListRemove(t *testing.T) {
	e := Self()
	e.Proto, e.Lock, e.Path, e.Since, e.Holds = "flock", "ino:1:2", "/x/a.lock", time.Now().UnixNano(), []string{"/x/b.lock"}
	name, err := Publish(&e)
	if err != nil {
		t.Fatal(err)
	}
	got := List()
	i := slices.Index(names(got), name)
	if i < 0 {
		t.Fatalf("List() = %v, want %s among them", names(got), name)
	}
	if g := got[i]; g.PID != os.Getpid() || g.Lock != e.Lock || g.Path != e.Path || g.Since != e.Since || !slices.Equal(g.Holds, e.Holds) {
		t.Errorf("listed %+v, published %+v", g, e)
	}
	if err := Remove(name); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(List()), name) {
		t.Errorf("%s still listed after Remove", name)
	}
	if err := Remove(name); err != nil {
		t.Errorf("a second Remove: %v", err)
	}

	dead := e
	dead.PID = testenv.DeadPID(t)
	dead.ProcStart = 0
	dn, err := Publish(&dead)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(List()), dn) {
		t.Errorf("the entry of dead pid %d is listed", dead.PID)
	}
	dir, _ := Dir()
	if _, err := os.Stat(filepath.Join(dir, dn)); !os.IsNotExist(err) {
		t.Errorf("the entry of a dead waiter is left behind: %v", err)
	}
}

// TestNotPrivate: in a directory others may write, nothing is believed.
func TestNotPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the directory's mode is unix's")
	}
	e := Self()
	e.Proto, e.Lock, e.Path, e.Since = "flock", "ino:1:3", "/x/c.lock", time.Now().UnixNano()
	name, err := Publish(&e)
	if err != nil {
		t.Fatal(err)
	}
	defer Remove(name)
	dir, _ := Dir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if got := List(); len(got) != 0 {
		t.Errorf("List() in a directory anyone may write = %v, want nothing", names(got))
	}
	if _, err := Publish(&e); err == nil {
		t.Error("Publish into a directory anyone may write succeeded")
	}
}
