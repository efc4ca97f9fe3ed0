package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"

	"github.com/hold-dev/hold/doctor"
	"github.com/hold-dev/hold/internal/lockspec"
)

func init() {
	register(&command{
		name:    "doctor",
		summary: "check by experiment whether locks work on the filesystem holding PATH",
		usage:   "doctor [--json] [--protocol NAME] [PATH]",
		help: `
Runs quick, real experiments in a scratch directory inside PATH (default: the
current directory), removed afterwards, also when a probe fails or doctor is
interrupted: the filesystem's type (local, network, FUSE); whether a second
process sees a kernel lock the first holds, exclusive and shared; whether
flock(2) and fcntl locks interact (the sign of NFS emulation); whether the
kernel frees the lock of a process that exits; whether mkdir is atomic under
a race and O_EXCL create refuses an existing file (what the portable protocol
builds on); whether rename replaces atomically (what readers that do not lock
need during 'hold update'); whether a directory's removal is reported by
change notification; and the filesystem's clock against this machine's.

Each protocol is judged only on what it needs; findings that matter to
something else (rename, slow wake-ups) are printed as notes. The last line is
the verdict: which protocol hold uses here and whether it is safe.

The verdict is about the protocol --protocol (or HOLD_PROTOCOL) selects,
flock by default. Doctor runs on one machine: on a network filesystem it
reasons about other machines from the filesystem type and the experiments,
and says "could not tell" where it cannot.

Exit status: 0 safe, 1 unsafe, 2 could not tell (including when the check
could not run), 64 usage error, 128+N when interrupted by signal N.`,
		run: runDoctor,
	})
	register(&command{
		name:   doctorPeerCommand,
		hidden: true,
		usage:  doctorPeerCommand + " SCRATCH",
		run:    runDoctorPeer,
	})
}

// doctorPeerCommand is the hidden subcommand that is doctor's second
// process: it takes locks on request (see doctor.ServePeer).
const doctorPeerCommand = "doctor-peer"

// stallEnv, for tests only, makes doctor stop after the named probe until
// it is interrupted, and say so on stderr, so that a test can deliver a
// signal at a known point and check that nothing is left behind.
const stallEnv = "HOLD_DOCTOR_STALL_AFTER"

func runDoctor(args []string) int {
	fs := newFlagSet("doctor", true)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	defProto := os.Getenv(lockspec.ProtocolEnv)
	if defProto == "" {
		defProto = lockspec.DefaultProtocol
	}
	proto := fs.String("protocol", defProto, "judge protocol `NAME`: "+strings.Join(lockspec.ProtocolNames(), ", ")+"; "+lockspec.ProtocolEnv+" sets the default")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 1 {
		return fail("doctor", usagef("expected at most one PATH"), exitConflict)
	}
	// Doctor judges the two filesystem protocols by name, whether or not
	// this build registers them, and says "could not tell" for others.
	if _, ok := lockspec.ProtocolSummary(*proto); !ok && *proto != "flock" && *proto != "dir" {
		return fail("doctor", usagef("unknown protocol %q (known: %s)", *proto, strings.Join(lockspec.ProtocolNames(), ", ")), exitConflict)
	}
	dir := "."
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}

	ctx, stopSignals := interruptible(context.Background())
	var once sync.Once
	stop := func() { once.Do(stopSignals) }
	defer stop()
	// After the first signal the default behaviour returns, so that a
	// second ^C ends doctor even if a probe is stuck in a system call on
	// an unresponsive filesystem (the peer, which ignores SIGINT, then
	// removes the scratch directory).
	context.AfterFunc(ctx, stop)
	cfg := doctor.Config{Protocol: *proto, NewPeer: startDoctorPeer}
	if probe := os.Getenv(stallEnv); probe != "" {
		cfg.AfterProbe = func(ctx context.Context, name string) {
			if name == probe {
				fmt.Fprintf(os.Stderr, "hold doctor: stalled after %s\n", name)
				<-ctx.Done()
			}
		}
	}
	rep, err := doctor.Check(ctx, dir, cfg)
	if ctx.Err() != nil {
		// Interrupted: the scratch directory is gone (Check removed it);
		// exit as an interrupted hold does.
		cause := context.Cause(ctx)
		fmt.Fprintf(os.Stderr, "hold doctor: %v; nothing was left behind in %s\n", cause, dir)
		return exitCode(cause, exitConflict)
	}
	if err != nil && len(rep.Probes) > 0 {
		// The check ran but its scratch directory could not be removed.
		// (One that could not run at all says why in its summary, with
		// the verdict unknown.)
		fmt.Fprintf(os.Stderr, "hold doctor: %v\n", err)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail("doctor", err, exitConflict)
		}
	} else {
		printDoctorReport(os.Stdout, rep)
	}
	return rep.Verdict.ExitStatus()
}

// startDoctorPeer starts this hold binary as doctor's second process. If
// the binary cannot be found (it was deleted while running), the second
// party falls back to a second open in this process, which the report
// shows (second_process: false).
func startDoctorPeer(ctx context.Context, scratch string) (doctor.Peer, error) {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "hold doctor: cannot find the hold binary (%v); the second party is a second open in this process instead\n", err)
		return doctor.NewLocalPeer(), nil
	}
	cmd := exec.Command(exe, doctorPeerCommand, scratch)
	cmd.Stderr = os.Stderr
	p, err := doctor.StartPeer(ctx, cmd)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "hold doctor: %v; the second party is a second open in this process instead\n", err)
		return doctor.NewLocalPeer(), nil
	}
	return p, err
}

// runDoctorPeer is the second process. It ignores SIGINT: a ^C on the
// terminal reaches the whole process group, and the doctor, not the peer,
// decides when to stop; the peer ends when the doctor closes its input or
// dies.
func runDoctorPeer(args []string) int {
	if len(args) != 1 {
		return fail(doctorPeerCommand, usagef("expected SCRATCH"), exitConflict)
	}
	signal.Ignore(os.Interrupt)
	if err := doctor.ServePeer(args[0], os.Stdin, os.Stdout); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(os.Stderr, "hold %s: %v\n", doctorPeerCommand, err)
		return exitOSError
	}
	return 0
}

// printDoctorReport prints the report for a person: the filesystem, one
// line per probe, the other protocol's verdict, the notes, and the verdict
// last.
func printDoctorReport(w io.Writer, rep *doctor.Report) {
	if rep.Filesystem.Type != "" || rep.Filesystem.Magic != "" {
		kind := "local"
		switch {
		case rep.Filesystem.FUSE:
			kind = "FUSE"
		case rep.Filesystem.Network:
			kind = "network"
		case !rep.Filesystem.Known:
			kind = "unknown kind"
		}
		fmt.Fprintf(w, "%s: %s (%s)\n", rep.Path, rep.Filesystem, kind)
	}
	for _, p := range rep.Probes {
		fmt.Fprintf(w, "  %-5s %-22s %s\n", p.Result, p.Name, p.Detail)
	}
	for _, a := range rep.Assessments {
		if a.Protocol != rep.Protocol {
			fmt.Fprintf(w, "  (%s would be %s: %s)\n", a.Protocol, verdictWords(a.Verdict), a.Reason)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note (%s): %s\n", n.About, n.Detail)
	}
	fmt.Fprintln(w, rep.Summary)
}

func verdictWords(v doctor.Verdict) string {
	if v == doctor.Unknown {
		return "unknown"
	}
	return string(v)
}
