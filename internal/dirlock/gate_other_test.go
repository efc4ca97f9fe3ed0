//go:build unix && !linux

package dirlock

import "testing"

// blockedOn: no portable way to list blocked lock requests here.
func blockedOn(t *testing.T, path string) int { return -1 }
