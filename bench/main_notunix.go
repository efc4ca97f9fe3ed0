//go:build !unix

package main

import (
	"fmt"
	"os"
)

// main says why there is nothing to run: the suite compares kernel-lock
// implementations through flock(2) and flock(1), which are unix only.
func main() {
	fmt.Fprintln(os.Stderr, "bench: the benchmark suite runs on unix systems only")
	os.Exit(1)
}
