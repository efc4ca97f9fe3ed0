//go:build !windows

package testenv

// underWine is false off Windows: wine runs Windows programs only.
func underWine() bool { return false }
