//go:build !linux

package main

// openersOf: finding which processes have a file open needs /proc; other
// systems report none.
func openersOf(string) []opener { return nil }
