package doctor

import (
	"fmt"
	"strings"
)

// decide fills the assessments, the verdict and the summary from the
// probes. It is the one place that turns observations into a verdict.
func decide(r *Report) {
	r.Assessments = []Assessment{assessFlock(r), assessDir(r)}
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
	fs := r.Filesystem
	interact := r.FlockFcntlInteract
	switch {
	case fs.cls == classLocal:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("kernel locks exclude across processes on %s, a local filesystem", fs)
	case fs.cls == classServerLocks:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("kernel locks exclude here, and on %s the server decides them for every machine (checked from this machine only)", fs)
	case fs.cls == classEmulating && r.OS == "linux" && (fs.LocalLock == "flock" || fs.LocalLock == "all"):
		a.Verdict, a.Reason = Unsafe, fmt.Sprintf("on %s the client keeps flock locks to this machine, so processes on other machines sharing it never see them", fs)
	case fs.cls == classEmulating && r.OS == "linux" && interact != nil && !*interact:
		a.Verdict, a.Reason = Unsafe, fmt.Sprintf("on %s flock locks stay in this machine's kernel (they do not conflict with fcntl locks, so they are not sent to the server): processes on other machines never see them", fs)
	case fs.cls == classEmulating && r.OS == "linux" && interact != nil && *interact:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("on %s the client sends flock locks to the server as byte-range locks (checked from this machine only)", fs)
	case fs.FUSE:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes using this mount on this machine; whether anyone else sees them is up to the FUSE daemon of %s", fs)
	case fs.Network:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes on this machine; whether processes on other machines see them depends on %s, which cannot be tested from here", fs)
	default:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("kernel locks exclude among processes on this machine, but %s is not a filesystem doctor knows, so other machines may share it", fs)
	}
	return a
}

// assessDir judges the portable directory protocol: atomic mkdir and
// O_EXCL create are its mutual exclusion, rename its safe publication,
// and the clock its staleness rule. Change notification only makes it
// faster.
func assessDir(r *Report) Assessment {
	a := Assessment{Protocol: "dir"}
	if prerequisitesFail(r, &a, "the portable protocol's prerequisites fail: ", ProbeMkdir, ProbeCreateExcl, ProbeRename, ProbeClock) {
		return a
	}
	fs := r.Filesystem
	switch {
	case fs.FUSE && fs.cls != classLocal:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("mkdir is atomic on this machine, but FUSE filesystems backed by object stores (%s) may not make it atomic across machines", fs)
	case !fs.Known:
		a.Verdict, a.Reason = Unknown, fmt.Sprintf("mkdir, O_EXCL create and rename are atomic on this machine, but %s is not a filesystem doctor knows", fs)
	case fs.Network || fs.cls == classServerLocks:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("mkdir, O_EXCL create and rename are atomic, decided by the server of %s for every machine (checked from this machine only)", fs)
	default:
		a.Verdict, a.Reason = Safe, fmt.Sprintf("mkdir, O_EXCL create and rename are atomic on %s", fs)
	}
	return a
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
