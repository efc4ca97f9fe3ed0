package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

func init() {
	register(&command{
		name:    "demo",
		summary: "show lost updates without a lock, and none under hold",
		usage:   "demo [-n WRITERS] [-m RECORDS]",
		help: `
In a temporary directory, WRITERS processes each add RECORDS records to one
file by read-modify-write: read the file, parse it, add a record, write a
temporary file and rename it over the original. The rename keeps the file
whole, but without a lock two writers that read the same version overwrite
each other's records. The demo runs the writers first with no lock, then
with each update under hold, and prints how many records were kept and
lost. Exit status 0, or 1 if a record was lost under hold (a bug).`,
		run: runDemo,
	})
	register(&command{
		name:   demoWriterCommand,
		hidden: true,
		usage:  demoWriterCommand + " FILE ID RECORDS lock|nolock",
		run:    runDemoWriter,
	})
}

// demoWriterCommand is the hidden subcommand the demo's writer processes
// run.
const demoWriterCommand = "demo-writer"

func runDemo(args []string) int {
	fs := newFlagSet("demo", true)
	writers := fs.IntP("writers", "n", 16, "the number of `WRITERS`, each a process of its own")
	records := fs.IntP("records", "m", 100, "the `RECORDS` each writer adds")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *writers < 1 || *writers > 1000 || *records < 1 || *records > 100000 || fs.NArg() > 0 {
		return fail("demo", usagef("want 1-1000 writers (-n), 1-100000 records (-m) and no arguments"), exitConflict)
	}
	self, err := os.Executable()
	if err != nil {
		return fail("demo", err, exitConflict)
	}
	dir, err := os.MkdirTemp("", "hold-demo-")
	if err != nil {
		return fail("demo", err, exitConflict)
	}
	defer os.RemoveAll(dir)

	each := "each add"
	if *writers == 1 {
		each = "adds"
	}
	fmt.Printf("hold demo: %s %s %s to one file by\n", plural(*writers, "writer process", "writer processes"), each, plural(*records, "record", "records"))
	fmt.Printf("read-modify-write (read, parse, add a record, write a temp file, rename).\n\n")
	fmt.Printf("%-10s %9s %9s %9s %10s\n", "lock", "expected", "kept", "lost", "wall time")
	expected := *writers * *records
	lostUnderHold, lostWithout := 0, 0
	for _, locked := range []bool{false, true} {
		mode, name := "none", "nolock"
		if locked {
			mode, name = "hold", "lock"
		}
		file := filepath.Join(dir, "records-"+name+".txt")
		elapsed, err := runDemoWriters(self, file, *writers, *records, locked)
		if err != nil {
			return fail("demo", err, exitConflict)
		}
		kept, err := countRecords(file)
		if err != nil {
			return fail("demo", err, exitConflict)
		}
		lost := expected - kept
		if locked {
			lostUnderHold = lost
		} else {
			lostWithout = lost
		}
		fmt.Printf("%-10s %9d %9d %9d %9.2fs\n", mode, expected, kept, lost, elapsed.Seconds())
	}
	fmt.Println()
	if lostUnderHold != 0 {
		fmt.Println("Records were lost under hold: that is a bug, please report it.")
		return 1
	}
	if lostWithout == 0 {
		if *writers == 1 {
			fmt.Println("With one writer nothing can collide, so nothing was lost even without a")
			fmt.Println("lock. Run more writers (-n 16) to see updates lost without one.")
		} else {
			fmt.Println("This time no two writers read the same version of the file, so nothing")
			fmt.Println("was lost even without a lock; more writers (-n) or records (-m) make a")
			fmt.Println("collision likely. Under hold each read-modify-write runs alone.")
		}
		return 0
	}
	fmt.Println("Without a lock, writers that read the same version of the file overwrite")
	fmt.Println("each other's records, and every one of them reports success. Under hold")
	fmt.Println("each read-modify-write runs alone: nothing is lost.")
	return 0
}

// plural is n with the singular or plural noun that fits it.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// runDemoWriters starts the writer processes, lets them go at the same
// moment (they wait for their stdin to close), and waits for all of them.
func runDemoWriters(self, file string, writers, records int, locked bool) (time.Duration, error) {
	mode := "nolock"
	if locked {
		mode = "lock"
	}
	var (
		cmds  []*exec.Cmd
		gates []io.WriteCloser
	)
	defer func() {
		for _, g := range gates {
			g.Close()
		}
	}()
	for i := range writers {
		cmd := exec.Command(self, demoWriterCommand, file, strconv.Itoa(i), strconv.Itoa(records), mode)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		gate, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, &errkind.ExecError{Cmd: self, Err: err}
		}
		cmds, gates = append(cmds, cmd), append(gates, gate)
	}
	start := time.Now()
	for _, g := range gates {
		g.Close()
	}
	gates = nil
	var firstErr error
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("a demo writer failed: %w", err)
		}
	}
	return time.Since(start), firstErr
}

// runDemoWriter is one writer: it waits for the start signal (its stdin
// closing), then adds its records one read-modify-write at a time.
func runDemoWriter(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: hold "+commands[demoWriterCommand].usage)
		return exitUsage
	}
	file, id := args[0], args[1]
	n, err := strconv.Atoi(args[2])
	if err != nil {
		return fail(demoWriterCommand, usagef("bad record count %q", args[2]), exitConflict)
	}
	locked := args[3] == "lock"
	io.Copy(io.Discard, os.Stdin)
	ctx := context.Background()
	debug := lockspec.DebugOptions() // the writers inherit HOLD_DEBUG
	for j := range n {
		rec := fmt.Sprintf("writer %s record %d", id, j)
		if locked {
			err = hold.Do(ctx, file, func(context.Context) error { return addRecord(file, rec) }, debug...)
		} else {
			err = addRecord(file, rec)
		}
		if err != nil {
			return fail(demoWriterCommand, err, exitConflict)
		}
	}
	return 0
}

// addRecord is the read-modify-write the demo protects: it reads every
// record, checks them (the "work" a real update does between reading and
// writing), appends one, and replaces the file through a temporary file
// and a rename, so readers never see a torn file.
func addRecord(file, rec string) error {
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "writer ") {
			return fmt.Errorf("%s: corrupt record %q", file, line)
		}
		lines = append(lines, line)
	}
	lines = append(lines, rec)
	tmp, err := os.CreateTemp(filepath.Dir(file), ".demo-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// countRecords counts the distinct records in file.
func countRecords(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			seen[line] = true
		}
	}
	return len(seen), nil
}
