// Command robust runs hold's robustness suite once: a seeded schedule of
// clients and faults against a hold binary, then the checker over the whole
// history. See docs/robustness.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/hold-dev/hold/robust"
)

func main() {
	robust.Main() // the clients and sections are this binary too
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "the seed of the schedule of operations and faults")
	dur := flag.Duration("duration", 30*time.Second, "how long the schedule lasts")
	proto := flag.String("protocol", "kernel", "kernel, fair, dir or mixed (kernel and dir on one target)")
	holdBin := flag.String("hold", "", "the hold binary to test (default: build the tree's)")
	out := flag.String("out", "", "directory for the targets, the history and the account (default: a new temporary one)")
	clients := flag.Int("clients", 12, "at most this many client processes at once")
	flag.Parse()
	if err := run(*seed, *dur, *proto, *holdBin, *out, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "robust:", err)
		os.Exit(2)
	}
}

func run(seed uint64, dur time.Duration, proto, holdBin, out string, clients int) error {
	var err error
	if out == "" {
		if out, err = os.MkdirTemp("", "hold-robust-"); err != nil {
			return err
		}
	} else if err = os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if holdBin == "" {
		wd, _ := os.Getwd()
		root, err := robust.RepoRoot(wd)
		if err != nil {
			return fmt.Errorf("%v: run it inside hold's tree, or give -hold", err)
		}
		holdBin = filepath.Join(out, "hold")
		if err := robust.BuildHold(root, holdBin); err != nil {
			return err
		}
	} else if holdBin, err = filepath.Abs(holdBin); err != nil {
		return err
	}
	// Each run its own directory: out/run, out/run.1, ...
	runDir := filepath.Join(out, "run")
	for i := 1; ; i++ {
		if _, err := os.Stat(runDir); os.IsNotExist(err) {
			break
		}
		runDir = filepath.Join(out, fmt.Sprintf("run.%d", i))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("robust: seed %d, protocol %s, duration %v, in %s\n", seed, proto, dur, out)
	res, err := robust.Run(ctx, robust.Config{Seed: seed, Duration: dur, Protocol: proto, Hold: holdBin,
		Dir: runDir, Clients: clients,
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		return err
	}
	fmt.Print(res.Account)
	fmt.Printf("history: %s\n", filepath.Join(res.Dir, "history.jsonl"))
	if !res.Verdict.OK() {
		os.Exit(1)
	}
	return nil
}
