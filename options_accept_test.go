package hold_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/nameddir"
)

// The entry points that take options, each called on target with one
// option. Every call that succeeds releases what it took.
var optionEntries = []struct {
	name string
	call func(target string, opt hold.Option) error
}{
	{"Acquire", func(target string, opt hold.Option) error {
		l, err := hold.Acquire(context.Background(), target, opt)
		if err == nil {
			err = l.Release()
		}
		return err
	}},
	{"TryAcquire", func(target string, opt hold.Option) error {
		l, err := hold.TryAcquire(target, opt)
		if err == nil {
			err = l.Release()
		}
		return err
	}},
	{"Do", func(target string, opt hold.Option) error {
		ran := false
		err := hold.Do(context.Background(), target, func(context.Context) error { ran = true; return nil }, opt)
		if errors.Is(err, hold.ErrInvalidOption) && ran {
			return errors.New("Do ran fn although it refused an option")
		}
		return err
	}},
	{"Update", func(target string, opt hold.Option) error {
		return hold.Update(context.Background(), target, func(old []byte) ([]byte, error) { return append(old, 'u'), nil }, opt)
	}},
	{"Append", func(target string, opt hold.Option) error {
		return hold.Append(context.Background(), target, []byte("a"), opt)
	}},
	{"Inspect", func(target string, opt hold.Option) error {
		_, err := hold.Inspect(target, opt)
		return err
	}},
	{"Break", func(target string, opt hold.Option) error {
		_, err := hold.Break(target, false, opt)
		return err
	}},
}

// TestOptionsWhereTheyApply checks, for every option and every entry
// point, that the option is accepted where it applies and refused where
// it does not, with an error that names both and says where it applies,
// before anything is locked or written.
func TestOptionsWhereTheyApply(t *testing.T) {
	every := []string{"Acquire", "TryAcquire", "Do", "Update", "Append", "Inspect", "Break"}
	taking := []string{"Acquire", "TryAcquire", "Do", "Update", "Append"}
	holding := []string{"Acquire", "TryAcquire", "Do"}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, o := range []struct {
		name    string
		opt     func(dir string) hold.Option
		applies []string
	}{
		{"LockFile", func(dir string) hold.Option { return hold.LockFile(filepath.Join(dir, "other.lock")) }, every},
		{"Named", func(dir string) hold.Option { return hold.Named("options-test-" + filepath.Base(dir)) }, every},
		{"ForRewrite", func(string) hold.Option { return hold.ForRewrite() }, every},
		{"WithProtocol", func(string) hold.Option { return hold.WithProtocol(flock.Protocol{}) }, every},
		{"Fair", func(string) hold.Option { return hold.Fair() }, every},
		{"Logger", func(string) hold.Option { return hold.Logger(logger) }, every},
		{"Shared", func(string) hold.Option { return hold.Shared() }, holding},
		{"Slots", func(string) hold.Option { return hold.Slots(4) }, holding},
		{"StopWithin", func(string) hold.Option { return hold.StopWithin(time.Second) }, taking},
		{"StaleAfter", func(string) hold.Option { return hold.StaleAfter(time.Minute) }, append(slices.Clip(taking), "Inspect")},
		{"RefuseMachineLocal", func(string) hold.Option { return hold.RefuseMachineLocal() }, taking},
		{"MakeDirs", func(string) hold.Option { return hold.MakeDirs() }, taking},
		{"LockFileMode", func(string) hold.Option { return hold.LockFileMode(0o600) }, taking},
		{"SoftFile", func(string) hold.Option { return hold.SoftFile() }, taking},
		{"FailIfHeldHere", func(string) hold.Option { return hold.FailIfHeldHere() }, taking},
		{"FailIfHeldBy", func(string) hold.Option { return hold.FailIfHeldBy() }, taking},
		{"Field", func(string) hold.Option { return hold.Field("job", "test") }, taking},
		{"OmitCommand", func(string) hold.Option { return hold.OmitCommand() }, taking},
		{"MustExist", func(string) hold.Option { return hold.MustExist() }, []string{"Update", "Append"}},
		{"AllowEmpty", func(string) hold.Option { return hold.AllowEmpty() }, []string{"Update"}},
		{"AllowSplit", func(string) hold.Option { return hold.AllowSplit() }, []string{"Update"}},
		{"AllowOwnerChange", func(string) hold.Option { return hold.AllowOwnerChange() }, []string{"Update"}},
	} {
		for _, e := range optionEntries {
			t.Run(o.name+"/"+e.name, func(t *testing.T) {
				dir := t.TempDir()
				target := filepath.Join(dir, "data")
				if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				if o.name == "Named" {
					t.Cleanup(func() { removeNamed(t, "options-test-"+filepath.Base(dir)) })
				}
				err := e.call(target, o.opt(dir))
				if slices.Contains(o.applies, e.name) {
					if errors.Is(err, hold.ErrInvalidOption) {
						t.Fatalf("hold.%s refused hold.%s, which applies to it: %v", e.name, o.name, err)
					}
					return
				}
				if !errors.Is(err, hold.ErrInvalidOption) {
					t.Fatalf("hold.%s given hold.%s: error %v, want one matching ErrInvalidOption", e.name, o.name, err)
				}
				var he *hold.Error
				if !errors.As(err, &he) || he.Path != target {
					t.Errorf("the refusal is not a *hold.Error naming the target: %#v", err)
				}
				msg := err.Error()
				for _, want := range []string{
					"hold." + o.name + " does not apply to hold." + e.name,
					"leave " + o.name + " out here: it applies to " + strings.Join(o.applies, ", "),
				} {
					if !strings.Contains(msg, want) {
						t.Errorf("the refusal %q does not say %q", msg, want)
					}
				}
				// Refused before anything was locked or written.
				if b, _ := os.ReadFile(target); string(b) != "x" {
					t.Errorf("the refused call changed the file to %q", b)
				}
				ents, _ := os.ReadDir(dir)
				if len(ents) != 1 {
					t.Errorf("the refused call left %d entries in the directory, want only the file", len(ents))
				}
			})
		}
	}
}

// TestZeroOption checks that the zero Option is accepted everywhere and
// does nothing.
func TestZeroOption(t *testing.T) {
	for _, e := range optionEntries {
		target := filepath.Join(t.TempDir(), "data")
		if err := e.call(target, hold.Option{}); errors.Is(err, hold.ErrInvalidOption) {
			t.Errorf("hold.%s refused the zero Option: %v", e.name, err)
		}
	}
}

// removeNamed removes the lock file a test left for the named lock name.
func removeNamed(t *testing.T, name string) {
	dir, err := nameddir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, name+".lock")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Error(err)
	}
}
