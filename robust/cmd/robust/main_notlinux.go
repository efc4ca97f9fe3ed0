//go:build !linux

// Command robust runs hold's robustness suite, which needs Linux (its
// nemesis reads /proc and stops processes); elsewhere it says so.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "robust: the robustness suite runs on Linux only")
	os.Exit(2)
}
