//go:build unix && !linux

package dirlock

import (
	"os"
	"testing"
)

// blockedOn: no portable way to list blocked lock requests here.
func blockedOn(t *testing.T, path string) int { return -1 }

// gateQueue is the path of the gate's queue: a directory of tickets here.
func gateQueue(path string) string { return path + GateSuffix + ".q" }

// blockGate makes the gate of path unusable by putting a plain file where
// its queue directory goes, and returns what it put there.
func blockGate(t *testing.T, path string) os.FileInfo {
	t.Helper()
	if err := os.WriteFile(gateQueue(path), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(gateQueue(path))
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
