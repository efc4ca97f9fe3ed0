package doctor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Op is one thing the lock probes ask of the second party.
type Op string

// The operations a Peer performs. Each lock operation opens the file anew,
// so it gets its own open file description, and tries the lock without
// waiting; a granted lock stays held until OpRelease.
const (
	// OpFlockExclusive tries an exclusive kernel lock the way hold takes
	// one (flock(2); LockFileEx on Windows).
	OpFlockExclusive Op = "flock-ex"
	// OpFlockShared tries a shared kernel lock.
	OpFlockShared Op = "flock-sh"
	// OpFcntlWrite tries a POSIX (fcntl F_SETLK) write lock on the whole
	// file. Unix only.
	OpFcntlWrite Op = "fcntl-wr"
	// OpRelease releases and closes everything the peer holds.
	OpRelease Op = "release"
	// OpMkdir creates the directory and answers whether this call made it.
	OpMkdir Op = "mkdir"
	// OpExit ends a peer process on the spot, without releasing what it
	// holds, as a crash would. Only a separate process can do it.
	OpExit Op = "exit"
)

// Answer is a peer's reply to an Op.
type Answer string

// The answers.
const (
	Granted Answer = "granted" // the lock was free and is now held
	Denied  Answer = "denied"  // someone holds a conflicting lock
	Won     Answer = "won"     // mkdir made the directory
	Lost    Answer = "lost"    // mkdir found it existing
	Done    Answer = "ok"      // release or exit happened
)

// Peer is the second party of the probes: another open of the same files,
// either in this process (NewLocalPeer) or in another process
// (StartPeer). The probes are written once against this interface.
type Peer interface {
	// Do performs op on path and answers.
	Do(ctx context.Context, op Op, path string) (Answer, error)
	// Separate reports whether the peer is another process, which OpExit
	// needs.
	Separate() bool
	// Close releases everything and, for a process, ends it.
	Close() error
}

// peerState is what one peer holds, and the one implementation of the
// operations, used by both transports.
type peerState struct {
	// inProcess selects, for OpFcntlWrite on Linux, an open-file-
	// description lock instead of a classic POSIX lock: classic POSIX
	// locks belong to the process, and this process may hold others on
	// the same file. See fcntlTryLock.
	inProcess bool
	held      []func() error
}

func (s *peerState) do(op Op, path string) (Answer, error) {
	switch op {
	case OpFlockExclusive, OpFlockShared:
		req := &lock.Request{Path: path, Shared: op == OpFlockShared, Owner: proc.Self()}
		req.Owner.ID = "hold-doctor-peer"
		h, err := flock.Protocol{}.TryAcquire(req)
		if errors.Is(err, lock.ErrBusy) {
			return Denied, nil
		}
		if err != nil {
			return "", err
		}
		s.held = append(s.held, h.Release)
		return Granted, nil
	case OpFcntlWrite:
		f, granted, err := fcntlTryLock(path, s.inProcess)
		if err != nil {
			return "", err
		}
		if !granted {
			return Denied, nil
		}
		s.held = append(s.held, f.Close)
		return Granted, nil
	case OpRelease:
		return Done, s.release()
	case OpMkdir:
		err := os.Mkdir(path, 0o755)
		switch {
		case err == nil:
			return Won, nil
		case errors.Is(err, os.ErrExist):
			return Lost, nil
		}
		return "", err
	}
	return "", fmt.Errorf("peer: unknown operation %q", op)
}

func (s *peerState) release() error {
	var errs []error
	for _, rel := range s.held {
		errs = append(errs, rel())
	}
	s.held = nil
	return errors.Join(errs...)
}

// localPeer is the second party inside this process: every lock operation
// opens the file again, so it has an open file description of its own.
//
// Why that is a faithful test: flock(2) locks (and Windows' LockFileEx
// locks) belong to the open file description (the handle), not to the
// process. The kernel's conflict check compares descriptions, so a second
// description in the same process conflicts exactly as one in another
// process would; on NFS and SMB the client sends the lock to the server
// with an owner per description too. hold itself relies on this: every
// Acquire opens its own descriptor so goroutines exclude each other.
//
// What it cannot catch: a filesystem that decides conflicts by process
// (a FUSE daemon keying locks on the pid it is given) could treat two
// descriptions of one process as one owner — in-process the probe then
// reports no exclusion, a false alarm, never a false "safe"; and the
// kernel freeing a lock when its holder dies needs a holder that can
// die. `hold doctor` therefore runs its second party as a real process
// (StartPeer) and adds that check. Neither can see whether another
// machine respects the locks; the verdict reasons about that from the
// filesystem type and the flock/fcntl interaction.
type localPeer struct {
	mu sync.Mutex
	st peerState
}

// NewLocalPeer returns a Peer in this process.
func NewLocalPeer() Peer { return &localPeer{st: peerState{inProcess: true}} }

func (p *localPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if op == OpExit {
		return "", errors.New("peer: a peer in this process cannot exit")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.do(op, path)
}

func (p *localPeer) Separate() bool { return false }

func (p *localPeer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.release()
}

// The wire protocol between StartPeer and ServePeer is one line per
// message: a request is "OP PATH" with PATH quoted as a Go string; a reply
// is an Answer, or "error MSG" / "unsupported MSG". The peer greets with
// "ready"; "bye" ends it cleanly.
const (
	lineReady       = "ready"
	lineBye         = "bye"
	lineError       = "error"
	lineUnsupported = "unsupported"
)

// scratchPrefix starts the name of every scratch directory doctor makes;
// a peer process removes only a directory so named.
const scratchPrefix = ".hold-doctor-"

// ServePeer runs the peer side of StartPeer on in and out: the body of the
// hidden command that `hold doctor` starts as its second process. scratch
// is the run's scratch directory: if in ends without a "bye" (the doctor
// was killed), the peer removes it, so even a killed run leaves nothing
// behind.
//
// On OpExit it returns at once, still holding its locks, and its caller
// must end the process without further ado: that is the crash whose
// effect (the kernel releasing the locks) the probe observes.
func ServePeer(scratch string, in io.Reader, out io.Writer) error {
	st := &peerState{}
	w := bufio.NewWriter(out)
	reply := func(s string) error {
		w.WriteString(s)
		w.WriteByte('\n')
		return w.Flush()
	}
	if err := reply(lineReady); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
serve:
	for sc.Scan() {
		line := sc.Text()
		if line == lineBye {
			return st.release()
		}
		opText, quoted, _ := strings.Cut(line, " ")
		op := Op(opText)
		path, err := strconv.Unquote(quoted)
		if err != nil && op != OpExit {
			reply(lineError + " " + strconv.Quote("peer: bad request "+strconv.Quote(line)))
			continue
		}
		if op == OpExit {
			reply(string(Done))
			return nil
		}
		a, err := st.do(op, path)
		switch {
		case errors.Is(err, lock.ErrUnsupported):
			err = reply(lineUnsupported + " " + strconv.Quote(err.Error()))
		case err != nil:
			err = reply(lineError + " " + strconv.Quote(err.Error()))
		default:
			err = reply(string(a))
		}
		if err != nil {
			break serve
		}
	}
	// The doctor is gone without saying bye: it was killed. Let go of
	// everything and remove its scratch directory, which nobody else will.
	st.release()
	if scratch != "" && strings.HasPrefix(filepath.Base(scratch), scratchPrefix) {
		os.RemoveAll(scratch)
	}
	return sc.Err()
}

// procPeer is a second process speaking the wire protocol.
type procPeer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // replies; closed when the peer's stdout ends
	done  chan struct{}
	err   error // cmd.Wait's result, set before done is closed

	mu     sync.Mutex
	closed bool
}

// StartPeer starts cmd, which must run ServePeer on its standard input and
// output (for `hold doctor`, the hold binary's hidden peer command), and
// returns it as a Peer. It waits for the peer's greeting until ctx ends.
func StartPeer(ctx context.Context, cmd *exec.Cmd) (Peer, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the second process: %w", err)
	}
	p := &procPeer{cmd: cmd, stdin: stdin, lines: make(chan string, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	line, err := p.next(ctx)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("starting the second process: %w", err)
	}
	if line != lineReady {
		p.kill()
		return nil, fmt.Errorf("starting the second process: it said %q instead of %q", line, lineReady)
	}
	return p, nil
}

// next returns the peer's next line. If ctx ends first the peer is killed:
// it may be stuck in a filesystem call, and it must not outlive the run.
func (p *procPeer) next(ctx context.Context) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.done
			return "", fmt.Errorf("second process ended: %v", p.err)
		}
		return line, nil
	case <-ctx.Done():
		p.kill()
		return "", ctx.Err()
	}
}

func (p *procPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", errors.New("second process already ended")
	}
	if _, err := fmt.Fprintf(p.stdin, "%s %s\n", op, strconv.Quote(path)); err != nil {
		return "", fmt.Errorf("second process: %w", err)
	}
	line, err := p.next(ctx)
	if err != nil {
		return "", err
	}
	kind, rest, _ := strings.Cut(line, " ")
	switch kind {
	case lineError, lineUnsupported:
		msg, uerr := strconv.Unquote(rest)
		if uerr != nil {
			msg = rest
		}
		if kind == lineUnsupported {
			return "", fmt.Errorf("%w (second process: %s)", lock.ErrUnsupported, msg)
		}
		return "", fmt.Errorf("second process: %s", msg)
	}
	if op == OpExit {
		// Wait until the process has really gone, so its locks have
		// been dropped by the kernel (if the filesystem does that).
		p.closed = true
		p.stdin.Close()
		select {
		case <-p.done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return Answer(line), nil
}

func (p *procPeer) Separate() bool { return true }

// Close says bye, so the peer releases its locks and exits, and waits for
// it for a moment; a peer that does not end by then is killed.
func (p *procPeer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		fmt.Fprintln(p.stdin, lineBye)
		p.stdin.Close()
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(2 * time.Second):
		p.kill()
		return errors.New("second process did not exit; killed it")
	}
}

// kill ends the peer process and waits for it briefly. A process stuck in
// an uninterruptible filesystem call cannot be reaped, so the wait is
// bounded rather than hanging the doctor too.
func (p *procPeer) kill() {
	p.closed = true
	p.cmd.Process.Kill()
	p.stdin.Close()
	// Nobody reads replies any more; drain them so the reading goroutine
	// gets to reap the process.
	go func() {
		for range p.lines {
		}
	}()
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
	}
}
