package hold_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// TestMachineLocalOnLocalDisk: on the test's temporary directory (a local
// filesystem on every machine the tests run on) a kernel lock is not
// machine-local, nor is RefuseMachineLocal in the way; a portable lock
// never is. The FUSE side is tested in internal/cli with bindfs mounts.
func TestMachineLocalOnLocalDisk(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target, hold.RefuseMachineLocal())
	if err != nil {
		t.Fatalf("Acquire with RefuseMachineLocal on a local disk: %v", err)
	}
	defer l.Release()
	if err := l.MachineLocal(); err != nil {
		t.Errorf("MachineLocal on a local disk: %v", err)
	}
	p, err := hold.TryAcquire(target+"2", hold.WithProtocol(portable.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if err := p.MachineLocal(); err != nil {
		t.Errorf("MachineLocal of a portable lock: %v", err)
	}
}

// TestMachineLocalMissingDirectory: a lock path whose directory does not
// exist is an error about that, not a finding.
func TestMachineLocalMissingDirectory(t *testing.T) {
	target := filepath.Join(t.TempDir(), "no", "such", "t")
	_, err := hold.TryAcquire(target, hold.RefuseMachineLocal())
	if err == nil || errors.Is(err, hold.ErrMachineLocal) {
		t.Fatalf("TryAcquire in a missing directory: %v", err)
	}
}

// BenchmarkMachineLocal is the check alone, on a local disk, to compare
// with BenchmarkAcquireRelease (one acquisition and release).
func BenchmarkMachineLocal(b *testing.B) {
	l, err := hold.Acquire(context.Background(), filepath.Join(b.TempDir(), "t"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.MachineLocal(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseRefuseMachineLocal is BenchmarkAcquireRelease with
// the check on every acquisition.
func BenchmarkAcquireReleaseRefuseMachineLocal(b *testing.B) {
	target := filepath.Join(b.TempDir(), "t")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := hold.Acquire(ctx, target, hold.RefuseMachineLocal())
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(); err != nil {
			b.Fatal(err)
		}
	}
}
