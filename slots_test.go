package hold_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// Slots(n) below 1, Slots beside Shared, and Slots given to Update and
// Append are refused with ErrInvalidOption before anything is created.
func TestSlotsRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "T")
	ctx := context.Background()
	_, errZero := hold.Acquire(ctx, target, hold.Slots(0))
	_, errShared := hold.TryAcquire(target, hold.Slots(2), hold.Shared())
	errUpdate := hold.Update(ctx, target, func(b []byte) ([]byte, error) { return []byte("x"), nil }, hold.Slots(2))
	errAppend := hold.Append(ctx, target, []byte("x"), hold.Slots(2))
	for name, err := range map[string]error{"Slots(0)": errZero, "Slots with Shared": errShared, "Update": errUpdate, "Append": errAppend} {
		if !errors.Is(err, hold.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused request left %d files in the directory", len(entries))
	}
}

// plainOnly is a third party's protocol that keeps no semaphores: the
// portable protocol seen through hold.Protocol's methods alone.
type plainOnly struct{ hold.Protocol }

// A protocol that keeps no semaphores refuses Slots above 1, naming
// itself; Slots(1) is its plain lock.
func TestSlotsUnsupportedProtocol(t *testing.T) {
	target := filepath.Join(t.TempDir(), "T")
	p := hold.WithProtocol(plainOnly{portable.New()})
	_, err := hold.TryAcquire(target, p, hold.Slots(3))
	if !errors.Is(err, hold.ErrUnsupported) || !strings.Contains(err.Error(), "dir") {
		t.Fatalf("Slots(3) on a protocol without semaphores: %v; want ErrUnsupported naming it", err)
	}
	l, err := hold.TryAcquire(target, p, hold.Slots(1))
	if err != nil {
		t.Fatalf("Slots(1) on a protocol without semaphores: %v", err)
	}
	if l.Slot() != 0 {
		t.Errorf("Slot() of a plain lock = %d", l.Slot())
	}
	l.Release()
}

// Do takes a slot; two Do calls of one process hold two slots at once.
func TestSlotsDo(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kernel semaphores wait in the fair queue, which is implemented on unix systems only")
	}
	target := filepath.Join(t.TempDir(), "T")
	ctx := context.Background()
	err := hold.Do(ctx, target, func(context.Context) error {
		return hold.Do(ctx, target, func(context.Context) error {
			st, err := hold.Inspect(target)
			if err != nil {
				return err
			}
			if st.Slots != 2 || st.SlotHolders[0] == nil || st.SlotHolders[1] == nil {
				t.Errorf("inside two Do calls: Slots %d, holders %v", st.Slots, st.SlotHolders)
			}
			return nil
		}, hold.Slots(2))
	}, hold.Slots(2))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := hold.Inspect(target); err != nil || st.State != hold.Free || st.Slots != 2 {
		t.Fatalf("after the Do calls: %+v, %v; want a free semaphore of 2", st, err)
	}
}
