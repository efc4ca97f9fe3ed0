package robust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
	"golang.org/x/sys/unix"
)

// roleEnv names the environment variable that turns the suite's own binary
// (the test binary or the command) into one of its client or section
// programs; Main dispatches on it.
const roleEnv = "HOLD_ROBUST_ROLE"

const (
	roleSection = "section"   // a critical section run by hold run or flock(1)
	roleFilter  = "filter"    // hold update's filter: reads, records, increments
	roleGo      = "go-client" // a Go program linking hold
)

// now is CLOCK_MONOTONIC in nanoseconds, the one clock every process of a
// run records with, so entries and exits of different processes compare.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// Main runs the role the environment asks for and exits; without one it
// returns, and the caller goes on as the test binary or the command.
func Main() {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	c := childFromEnv()
	var code int
	switch role {
	case roleSection:
		code = c.section()
	case roleFilter:
		code = c.filter(os.Stdin, os.Stdout)
	case roleGo:
		code = c.goClient()
	default:
		fmt.Fprintf(os.Stderr, "robust: unknown role %q\n", role)
		code = 2
	}
	os.Exit(code)
}

type child struct {
	rec     Record // the fields every record of this process carries
	holdFor time.Duration
	try     bool
	wait    time.Duration
	goCall  string
	out     *os.File
}

func childFromEnv() *child {
	atoi := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	c := &child{
		rec: Record{
			Op: atoi("RB_OP"), Pid: os.Getpid(), Mode: os.Getenv("RB_MODE"), N: atoi("RB_N"),
			Target: os.Getenv("RB_TARGET"), Client: os.Getenv("RB_CLIENT"), Proto: os.Getenv("RB_PROTO"),
			Slot: -1,
		},
		holdFor: time.Duration(atoi("RB_HOLDMS")) * time.Millisecond,
		try:     os.Getenv("RB_TRY") == "1",
		wait:    time.Duration(atoi("RB_WAITMS")) * time.Millisecond,
		goCall:  os.Getenv("RB_GOCALL"),
	}
	if t, err := strconv.ParseUint(os.Getenv("HOLD_TOKEN"), 10, 64); err == nil {
		c.rec.Token = t
	}
	if s, err := strconv.Atoi(os.Getenv("HOLD_SLOT")); err == nil {
		c.rec.Slot = s
	}
	f, err := os.OpenFile(fmt.Sprintf("%s/p%d.jsonl", os.Getenv("RB_HIST"), os.Getpid()), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "robust:", err)
		os.Exit(2)
	}
	c.out = f
	return c
}

// record appends one event as a line of JSON in a single write, so a kill
// leaves whole lines only.
func (c *child) record(ev string, edit func(*Record)) {
	r := c.rec
	r.Ev, r.T = ev, now()
	if edit != nil {
		edit(&r)
	}
	b, _ := json.Marshal(r)
	c.out.Write(append(b, '\n'))
}

// terms returns a channel of SIGTERM: hold run and hold update stop the
// command with it when the lock is lost (or hold itself is stopped).
func terms() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	return ch
}

func (c *child) section() int {
	term := terms()
	c.record("enter", nil)
	select {
	case <-time.After(c.holdFor):
		c.record("exit", nil)
		return 0
	case <-term:
		c.record("term", nil)
		return 143
	}
}

// step is one update of the counter from inside its critical section.
func (c *child) step(old []byte, term chan os.Signal) ([]byte, int) {
	v, err := parseCounter(old)
	if err != nil {
		c.record("badcounter", func(r *Record) { r.Note = string(old) })
		return nil, 3
	}
	c.record("enter", func(r *Record) { r.Old, r.OldLast = v.Count, v.Last })
	select {
	case <-time.After(c.holdFor):
	case <-term:
		c.record("term", nil)
		return nil, 143
	}
	out, _ := json.Marshal(counter{Count: v.Count + 1, Last: c.rec.Op})
	c.record("exit", nil)
	return out, 0
}

func (c *child) filter(in io.Reader, w io.Writer) int {
	term := terms()
	old, err := io.ReadAll(in)
	if err != nil {
		return 3
	}
	out, code := c.step(old, term)
	if code == 0 {
		w.Write(out)
	}
	return code
}

func (c *child) options() []hold.Option {
	var opts []hold.Option
	switch c.rec.Proto {
	case "fair":
		opts = append(opts, hold.Fair())
	case "dir":
		opts = append(opts, hold.WithProtocol(portable.New()))
	}
	switch c.rec.Mode {
	case modeShared:
		opts = append(opts, hold.Shared())
	case modeSlot:
		opts = append(opts, hold.Slots(c.rec.N))
	}
	return opts
}

// exitOf maps a Go client's error to the exit status hold's command gives
// the same failure, so the checker judges every client alike.
func exitOf(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, hold.ErrBusy), errors.Is(err, hold.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return 1
	case errors.Is(err, hold.ErrSlotCount):
		return 64
	case errors.Is(err, hold.ErrLost):
		return 65
	case errors.Is(err, hold.ErrDeadlock):
		return 70
	case errors.Is(err, hold.ErrNotRegular):
		return 66
	}
	return 71
}

func (c *child) goClient() int {
	term := terms()
	ctx := context.Background()
	if c.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.wait)
		defer cancel()
	}
	opts := c.options()
	var err error
	switch c.goCall {
	case goAcquire, goTry:
		var l *hold.Lock
		if c.try {
			l, err = hold.TryAcquire(c.rec.Target, opts...)
		} else {
			l, err = hold.Acquire(ctx, c.rec.Target, opts...)
		}
		if err != nil {
			break
		}
		c.record("enter", func(r *Record) { r.Token, r.Slot = l.Token(), l.Slot() })
		select {
		case <-time.After(c.holdFor):
			c.record("exit", nil)
			err = l.Release()
		case <-l.Lost():
			c.record("term", func(r *Record) { r.Note = "Lost" })
			l.Release()
			err = hold.ErrLost
		case <-term:
			c.record("term", nil)
			l.Release()
			return 143
		}
	case goDo:
		err = hold.Do(ctx, c.rec.Target, func(ctx context.Context) error {
			c.record("enter", nil)
			select {
			case <-time.After(c.holdFor):
				c.record("exit", nil)
				return nil
			case <-ctx.Done():
				c.record("term", func(r *Record) { r.Note = "Lost" })
				return context.Cause(ctx)
			}
		}, opts...)
	case goUpdate:
		code := 0
		err = hold.Update(ctx, c.rec.Target, func(old []byte) ([]byte, error) {
			out, k := c.step(old, term)
			if k != 0 {
				code = k
				return nil, fmt.Errorf("step failed (%d)", k)
			}
			return out, nil
		}, opts...)
		if code != 0 {
			return code
		}
	case goAppend:
		err = hold.Append(ctx, c.rec.Target, []byte(strconv.Itoa(c.rec.Op)+"\n"), opts...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
	}
	return exitOf(err)
}
