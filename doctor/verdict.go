package doctor

import (
	"fmt"
	"strings"

	"github.com/hold-dev/hold/internal/fsinfo"
)

// decide fills the assessments, the verdict and the summary from the
// probes. It is the one place that turns observations into a verdict.
func decide(r *Report) {
	r.Assessments = []Assessment{assessFlock(r), assessDir(r)}
	r.Notes = notes(r)
	r.Recommended = ""
	for _, a := range r.Assessments {
		if a.Verdict == Safe {
			r.Recommended = a.Protocol
			break
		}
	}
	own := r.Assessment(r.Protocol)
	if own == nil {
		own = &Assessment{Protocol: r.Protocol, Verdict: Unknown,
			Reason: "doctor checks the filesystem protocols (flock, dir), and " + r.Protocol + " does not keep its locks in the filesystem"}
	}
	r.Verdict = own.Verdict
	r.Summary = summarize(r, own)
}

func summarize(r *Report, own *Assessment) string {
	var b strings.Builder
	switch own.Verdict {
	case Safe:
		b.WriteString("safe: ")
	case Unsafe:
		b.WriteString("UNSAFE: ")
	default:
		b.WriteString("could not tell: ")
	}
	fmt.Fprintf(&b, "hold uses %s here; %s", own.Protocol, own.Reason)
	if own.Verdict != Safe && r.Recommended != "" && r.Recommended != own.Protocol {
		fmt.Fprintf(&b, "; --protocol %s is safe here", r.Recommended)
	}
	var warned []string
	for _, p := range r.Probes {
		if p.Result == Warn {
			warned = append(warned, p.Name)
		}
	}
	if len(warned) > 0 {
		fmt.Fprintf(&b, " (warnings: %s)", strings.Join(warned, ", "))
	}
	return b.String()
}

// assessFlock judges kernel locks. The probes show whether locks exclude
// among processes of this machine; whether processes on other machines
// see them cannot be observed from here, so that part rests on what the
// filesystem is and on the flock/fcntl interaction.
func assessFlock(r *Report) Assessment {
	a := Assessment{Protocol: "flock"}
	if prerequisitesFail(r, &a, "kernel locks do not work here: ", ProbeLockExclusive, ProbeLockShared, ProbeLockExit) {
		return a
	}
	fs := r.fs
	interact := r.FlockFcntlInteract
	switch {
	case fs.Class == fsinfo.Local:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("kernel locks exclude across processes on %s, a local filesystem", fs)
	case fs.Class == fsinfo.ServerLocks:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("kernel locks exclude here, and on %s the server decides them for every machine (checked from this machine only)", fs)
	case fs.Class == fsinfo.Emulating && r.OS == "linux" && (fs.LocalLock == "flock" || fs.LocalLock == "all"):
		a.Verdict, a.Reason = Unsafe, fmt.Sprintf("on %s the client keeps flock locks to this machine, so processes on other machines sharing it never see them", fs)
	case len(fs.LockOptions) > 0 && r.OS == "linux":
		a.Verdict, a.Reason = Unsafe, fmt.Sprintf("on %s %s, so processes on other machines sharing it never see them", fs, fs.LocalLocks())
	case fs.Class == fsinfo.Emulating && r.OS == "linux" && interact != nil && !*interact:
		a.Verdict, a.Reason = Unsafe, fmt.Sprintf("on %s flock locks stay in this machine's kernel (they do not conflict with fcntl locks, so they are not sent to the server): processes on other machines never see them", fs)
	case fs.Class == fsinfo.Emulating && r.OS == "linux" && interact != nil && *interact:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("on %s the client sends flock locks to the server as byte-range locks (checked from this machine only)", fs)
	case fs.FUSE && fs.LocalLocks() != "":
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes using this mount on this machine, but on %s %s: whether other machines, or other mounts of the same files, see them is up to its FUSE daemon", fs, fs.LocalLocks())
	case fs.FUSE:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes using this mount on this machine; whether anyone else sees them is up to the FUSE daemon of %s", fs)
	case fs.Network:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes on this machine; whether processes on other machines see them depends on %s, which cannot be tested from here", fs)
	default:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes on this machine, but %s is not a filesystem doctor knows, so other machines may share it", fs)
	}
	return a
}

// assessDir judges the portable directory protocol on what its mutual
// exclusion rests on: atomic mkdir and O_EXCL create, here and, by the
// filesystem's nature, for every machine sharing it; and the clock, which
// its staleness rule compares heartbeats against. Rename over an existing
// file is not among them (the protocol never replaces a file; that is
// `hold update`, see notes), and change notification only makes waiters
// faster.
func assessDir(r *Report) Assessment {
	a := Assessment{Protocol: "dir"}
	if prerequisitesFail(r, &a, "the portable protocol's prerequisites fail: ", ProbeMkdir, ProbeCreateExcl, ProbeClock) {
		return a
	}
	a.Verdict, a.Reason = createAtomicity(r.fs, false)
	return a
}

// createAtomicity judges, once the probes showed mkdir and O_EXCL create
// atomic on this machine, whether they are atomic for every machine that
// shares fs. mirrored is true when fs is the directory a FUSE filesystem
// passes them to.
func createAtomicity(fs fsinfo.Filesystem, mirrored bool) (Verdict, string) {
	switch {
	case fs.FUSE && fs.Class == fsinfo.Local:
		return Safe, fmt.Sprintf("mkdir and O_EXCL create are atomic on %s, a FUSE filesystem over local storage", fs)
	case fs.FUSE && fs.Mirror != nil && !mirrored:
		v, why := createAtomicity(*fs.Mirror, true)
		return v, fmt.Sprintf("%s passes mkdir and create to %s, where %s", fs, fs.Source, why)
	case fs.CreateDecidedCentrally():
		return Safe, fmt.Sprintf("mkdir and O_EXCL create are atomic, decided by the server of %s for every machine (checked from this machine only)", fs)
	case fs.FUSE:
		return Unknown, fmt.Sprintf("mkdir and O_EXCL create are atomic on this machine, but a FUSE filesystem (%s) may not make them atomic across machines (object stores have no atomic create-if-absent)", fs)
	case !fs.Known:
		return Unknown, fmt.Sprintf("mkdir and O_EXCL create are atomic on this machine, but %s is not a filesystem doctor knows", fs)
	case fs.Network || fs.Class == fsinfo.ServerLocks:
		return Safe, fmt.Sprintf("mkdir and O_EXCL create are atomic, decided by the server of %s for every machine (checked from this machine only)", fs)
	}
	return Safe, fmt.Sprintf("mkdir and O_EXCL create are atomic on %s", fs)
}

// notes collects the findings that matter to something other than a
// protocol's exclusion.
func notes(r *Report) []Note {
	var ns []Note
	if p := r.Probe(ProbeRename); p != nil && p.Result == Fail {
		ns = append(ns, Note{About: NoteUpdate, Detail: "readers that do not take the lock may see the file missing, torn or stale while `hold update` replaces it (" + p.Detail + "); the lock itself is unaffected, and readers that take it (hold run -s) are safe"})
	}
	if p := r.Probe(ProbeNotify); p != nil && p.Result == Warn {
		ns = append(ns, Note{About: NoteWaiting, Detail: "portable-protocol waiters poll for a release instead of being woken (" + p.Detail + "): a hand-off takes up to the backoff cap (HOLD_DIR_MAX_POLL)"})
	}
	return ns
}

// prerequisitesFail gives a its verdict when the probes a protocol rests on
// do not all pass, and reports whether it did: Unsafe if any of them failed
// (the first failure's detail after failPrefix), otherwise Unknown if one
// did not run or could not be carried out.
func prerequisitesFail(r *Report, a *Assessment, failPrefix string, names ...string) bool {
	for _, name := range names {
		if p := r.Probe(name); p != nil && p.Result == Fail {
			a.Verdict, a.Reason = Unsafe, failPrefix+p.Detail
			return true
		}
	}
	for _, name := range names {
		switch p := r.Probe(name); {
		case p == nil:
			a.Verdict, a.Reason = Unknown, name+" did not run"
			return true
		case p.Result == Error:
			a.Verdict, a.Reason = Unknown, name+" could not be carried out: "+p.Detail
			return true
		}
	}
	return false
}
