package hold

import (
	"context"

	"github.com/hold-dev/hold/internal/doctor"
)

// DoctorReport is what Doctor found: the filesystem, each probe's result,
// a verdict per protocol, and the verdict and one-line summary for the
// protocol in use. Its JSON form is what `hold doctor --json` prints.
type DoctorReport = doctor.Report

// DoctorVerdict is Doctor's answer: VerdictSafe, VerdictUnsafe or
// VerdictUnknown. ExitStatus maps it to 0, 1 and 2.
type DoctorVerdict = doctor.Verdict

// The verdicts.
const (
	// VerdictSafe: the experiments show the protocol works here.
	VerdictSafe = doctor.Safe
	// VerdictUnsafe: an experiment showed that it does not (locks that
	// exclude nobody, locks that other machines cannot see, a mkdir that
	// is not atomic, a file server clock far behind).
	VerdictUnsafe = doctor.Unsafe
	// VerdictUnknown: Doctor could not tell, because an experiment could
	// not run or because what matters cannot be seen from this machine.
	VerdictUnknown = doctor.Unknown
)

// Doctor checks, by experiment, whether locks work on the filesystem that
// holds dir, for a program to call at start-up before it trusts hold with
// its data:
//
//	rep, err := hold.Doctor(ctx, dataDir)
//	if err != nil || rep.Verdict != hold.VerdictSafe {
//		log.Fatalf("locks cannot be trusted in %s: %v %s", dataDir, err, rep.Summary)
//	}
//
// It works in a scratch directory inside dir (".hold-doctor-*"), removed
// before it returns, also when ctx is cancelled or a probe fails, and takes
// well under a second on a local disk. The verdict is about the protocol
// the options choose (WithProtocol; the kernel lock by default); the report
// judges the portable directory protocol too. Other options are ignored.
//
// The second party of the lock experiments is a second open of the lock
// file in this process: kernel locks belong to the open file, so this
// tests exactly what two processes would see (see internal/doctor for what
// it cannot catch). `hold doctor` uses a real second process as well.
//
// The report is never nil. The error is non-nil only when the check could
// not run (dir missing or not writable) or ctx ended it; the partial report
// then comes with it, with VerdictUnknown and a Summary that says why, so
// the example above may print rep.Summary in either case.
func Doctor(ctx context.Context, dir string, opts ...Option) (*DoctorReport, error) {
	c := newConfig(opts)
	return doctor.Run(ctx, dir, doctor.Config{Protocol: c.protocol.Name()})
}
