//go:build !linux

package flock

import (
	"errors"
	"os"
	"time"

	"github.com/hold-dev/hold/lock"
)

// errNoInProcess: only Linux hands out recipes (see RecipeFor).
var errNoInProcess = errors.New("in-process locks are taken only on Linux")

// RecipeFor hands out no recipe outside Linux.
func RecipeFor(f *os.File, client *lock.Owner) (*Recipe, bool) { return nil, false }

// WriteRecord fails outside Linux, which hands out no recipe.
func WriteRecord(path string, id File, ticket []byte, startedAt time.Time) (*Written, error) {
	return nil, errNoInProcess
}

// EraseRecord fails outside Linux, which hands out no recipe.
func EraseRecord(path string, id File, fence uint64, record []byte) error { return errNoInProcess }

// CheckHeld fails outside Linux, which hands out no recipe.
func CheckHeld(path string, id File) error { return errNoInProcess }

// HeldIn is false outside Linux: no client holds a lock in its process.
func HeldIn(path string, files []File) bool { return false }
