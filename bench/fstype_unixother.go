//go:build unix && !linux

package main

// fsType is known on Linux only.
func fsType(dir string) string { return "filesystem not identified" }
