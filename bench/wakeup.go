//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// A fair hand-off always goes to a process that is asleep, so it costs at
// least one wake-up: the scheduler's latency on this machine at this
// moment. The suite measures that floor in the same run, by bouncing a byte
// between two processes over pipes (each bounce wakes the other side).

// echoMain is the far end of the bounce: it copies stdin to stdout one byte
// at a time.
func echoMain() int {
	var b [1]byte
	for {
		if _, err := os.Stdin.Read(b[:]); err != nil {
			return 0
		}
		if _, err := os.Stdout.Write(b[:]); err != nil {
			return 1
		}
	}
}

// wakeupLatency returns the median and the mean time of one wake-up: half
// a round trip. The mean counts the slow wake-ups of a busy machine, which
// a chain of hand-offs adds up.
func wakeupLatency(self string, rounds int) (median, mean time.Duration, err error) {
	cmd := exec.Command(self, "-echo")
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer cmd.Wait()
	defer in.Close()
	var b [1]byte
	trips := make([]time.Duration, 0, rounds)
	var sum time.Duration
	for i := 0; i < rounds; i++ {
		start := time.Now()
		if _, err := in.Write(b[:]); err != nil {
			return 0, 0, err
		}
		if _, err := io.ReadFull(out, b[:]); err != nil {
			return 0, 0, fmt.Errorf("echo: %w", err)
		}
		trips = append(trips, time.Since(start))
		sum += trips[i]
	}
	return percentile(trips, 50) / 2, sum / time.Duration(2*rounds), nil
}
