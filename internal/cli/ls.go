package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hold-dev/hold/internal/nameddir"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/dirlock"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/report"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/portable"
)

func init() {
	register(&command{
		name:    "ls",
		summary: "list the locks in directories: state, holder, token and waiters",
		usage:   "ls [--json] [-r] [PATH...]\nls --all [--json]",
		help: `
Lists the locks in each directory PATH (default: the current directory,
your named-lock directory, and the named locks still held where earlier
versions of hold kept them), one line per lock: kernel lock files (*.lock),
portable lock directories (*.lock, --protocol dir) and the waiters of fair
queues. A PATH like etcd://host:port/prefix lists the etcd locks under that
key prefix; postgres://user@host:port/db lists the database's locks, and
postgres://user@host:port/db#prefix those whose names start with prefix.
-r descends into subdirectories. WAITERS counts fair waiters,
local waiters of a portable lock and, on Linux, processes blocked on the
kernel lock (/proc/locks); it is a snapshot.

With no PATH, a note after the table says where the named locks it lists
come from (they are the same in every directory); 'hold ls .' lists the
current directory alone.

A *.lock file that is neither empty, nor holds an owner record, nor is
locked right now is another tool's file (Cargo.lock, yarn.lock) and is not
listed. On Linux, --all lists every such lock held on this machine, wherever
its file is, from the kernel's lock table, or says that none is held.

Like status, ls never creates, changes or waits for anything. With --json it
prints one object per lock per line: the fields of 'hold status --json' and
waiters.

Exit status: 0 when every PATH could be listed, 66 when one cannot be read,
64 for bad usage.`,
		run: runLs,
	})
}

// lsReport is one line of `hold ls --json`: status's report and the
// number of waiters.
type lsReport struct {
	*report.Status
	Waiters int `json:"waiters"`
	// Queue is the fair queue's file beside the lock, when there is one:
	// it stays after use, as the lock file does.
	Queue string `json:"queue,omitempty"`
}

// lsHiddenFlags are the lock flags that mean nothing to ls; only the
// connection settings of remote backends stay visible.
var lsHiddenFlags = append([]string{"conflict-exit-code", "lock-file", "name", "protocol"}, waitFlags...)

func runLs(args []string) int {
	fs := newFlagSet("ls", true)
	asJSON := fs.Bool("json", false, "print one JSON object per lock per line")
	recursive := fs.BoolP("recursive", "r", false, "descend into subdirectories")
	all := fs.Bool("all", false, "list every hold lock held on this machine (Linux), wherever it is")
	var lf lockFlags
	lf.addTo(fs)
	fs = withoutFlags(fs, true, lsHiddenFlags...)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	paths := fs.Args()
	// A network prefix is listed by hold-remote: hand over before anything
	// is printed, so that it lists every PATH in order.
	if err := lockspec.HandOffIfRemote(paths...); err != nil {
		return fail("ls", err, exitConflict)
	}
	// One reading of the kernel's lock table serves every lock listed.
	defer proc.ShareLockTable()()
	// The table is written cell by cell: buffered, 10,000 locks cost a
	// few writes rather than 125,000.
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	l := &lister{out: out, asJSON: *asJSON, recursive: *recursive, portable: portable.New(),
		kernel: &kernelTable{}}
	if *all {
		if len(paths) > 0 || *recursive {
			return fail("ls", usagef("--all takes no PATH and no -r: it lists the whole machine"), exitConflict)
		}
		if err := l.listHeldEverywhere(); err != nil {
			return fail("ls", err, exitConflict)
		}
		l.empty = "no hold lock is held on this machine"
		return l.finish()
	}
	byDefault := len(paths) == 0
	if byDefault {
		paths = defaultLsPaths()
	}
	for _, p := range paths {
		if lockspec.AddressScheme(p) != "" {
			spec := lf.spec(p)
			l.report(l.listRemote(p, &spec))
			continue
		}
		l.report(l.listDir(p))
	}
	if byDefault {
		l.listEarlierNamed()
		l.noteNamedSources(paths[1:])
	}
	return l.finish()
}

// noteNamedSources adds, for a listing by default, a note saying where
// its named locks come from: named is the named-lock directory when it
// was listed, and the earlier places' rows are told apart by their path.
func (l *lister) noteNamedSources(named []string) {
	from := func(dir string) bool {
		for _, r := range l.rows {
			if filepath.Dir(r.st.Path) == dir {
				return true
			}
		}
		return false
	}
	for _, dir := range named {
		if from(dir) {
			l.notes = append(l.notes, fmt.Sprintf("Named locks (--name NAME) are listed from %s, your named-lock directory, whatever the current directory; 'hold ls .' lists this directory alone.", dir))
		}
	}
	for _, dir := range nameddir.EarlierOwn() {
		if from(dir) {
			l.notes = append(l.notes, fmt.Sprintf("Those in %s are held where earlier versions of hold kept named locks; they exclude their names too.", dir))
		}
	}
}

// defaultLsPaths are the current directory and, when it exists and is
// another directory, the named-lock directory. It is not created.
func defaultLsPaths() []string {
	paths := []string{"."}
	named, err := nameddir.Dir()
	if err != nil {
		return paths
	}
	nfi, err := os.Stat(named)
	if err != nil || !nfi.IsDir() {
		return paths
	}
	if cfi, err := os.Stat("."); err == nil && os.SameFile(cfi, nfi) {
		return paths
	}
	return append(paths, named)
}

// listEarlierNamed adds the named locks held where earlier versions of
// hold kept them (see hold.Named): a holder there still excludes its name.
// Free ones there are not listed; they are leftovers of those versions.
func (l *lister) listEarlierNamed() {
	for _, dir := range nameddir.EarlierOwn() {
		n := len(l.rows)
		if l.listDir(dir) != nil {
			l.rows = l.rows[:n]
			continue
		}
		kept := l.rows[:n]
		for _, r := range l.rows[n:] {
			if r.st.State != hold.Free {
				kept = append(kept, r)
			}
		}
		l.rows = kept
	}
}

// lister lists locks and prints them.
type lister struct {
	out       io.Writer
	asJSON    bool
	recursive bool
	// portable inspects directory locks; one instance serves them all.
	portable hold.Protocol
	// kernel is the kernel's lock table, read once if at all (Linux).
	kernel *kernelTable

	rows []lsRow
	code int
	// empty is printed (text only) when nothing was found, if set.
	empty string
	// notes follow the table (text only): where its rows come from.
	notes []string
}

// lsRow is one lock found.
type lsRow struct {
	st      *hold.Status
	waiters int
}

// report prints the error of listing something, if any, and goes on; the
// exit status will say that something failed.
func (l *lister) report(err error) {
	if err != nil {
		l.code = fail("ls", err, exitLockError)
	}
}

// add records one lock.
func (l *lister) add(st *hold.Status, waiters int) {
	l.rows = append(l.rows, lsRow{st: st, waiters: waiters})
}

// finish prints what was found and returns the exit status.
func (l *lister) finish() int {
	if l.asJSON {
		for _, r := range l.rows {
			b, _ := json.Marshal(lsReport{Status: report.NewStatus("", r.st), Waiters: r.waiters, Queue: fairQueueFile(r.st.Path)})
			fmt.Fprintf(l.out, "%s\n", b)
		}
		return l.code
	}
	if len(l.rows) == 0 {
		if l.empty != "" {
			fmt.Fprintln(l.out, l.empty)
		}
		return l.code
	}
	tw := tabwriter.NewWriter(l.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tPROTOCOL\tSTATE\tTOKEN\tWAITERS\tHOLDER")
	for _, r := range l.rows {
		holder := "-"
		if r.st.State != hold.Free && r.st.Holder != nil {
			holder = r.st.Holder.String()
		}
		state := r.st.State.String()
		if r.st.Slots > 0 {
			state = report.NewStatus("", r.st).SemaphoreState()
			holder = slotHoldersLine(r.st)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.st.Path, r.st.Protocol, state, r.st.Fence, r.waiters, holder)
	}
	tw.Flush()
	if len(l.notes) > 0 {
		fmt.Fprintf(l.out, "\n%s\n", strings.Join(l.notes, "\n"))
	}
	return l.code
}

// slotHoldersLine names a semaphore's holders in one line: "slot 0: pid
// 12 (...); slot 2: ...", "-" when none.
func slotHoldersLine(st *hold.Status) string {
	var parts []string
	for k, h := range st.SlotHolders {
		if h != nil {
			parts = append(parts, fmt.Sprintf("slot %d: %s", k, h.String()))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// fairQueueFile is the fair queue file beside the kernel lock at path, or
// "" when there is none.
func fairQueueFile(path string) string {
	q := path + fairq.QueueFileSuffix
	if _, err := os.Lstat(q); err == nil {
		return q
	}
	return ""
}

// sideFiles are what sits beside the locks of one directory: the queues
// of fair waiters and of the portable protocol's waiting gate, by the lock
// path they serve.
type sideFiles struct {
	queues map[string]bool // lock path -> has a fair queue
	gates  map[string]bool // lock path -> has a waiting gate's queue
}

// listDir lists the locks in dir and, with -r, below it.
func (l *lister) listDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() && strings.HasSuffix(dir, ".lock") {
		// One lock file named, as ls(1) lists one file.
		return l.listLock(filepath.Clean(dir), fs.FileInfoToDirEntry(fi), sideFiles{queues: map[string]bool{}, gates: map[string]bool{}})
	}
	if !fi.IsDir() {
		return usagef("ls %s: not a directory, nor a lock file (NAME.lock); `hold status %s` shows the lock of %s", dir, dir, dir)
	}
	return l.walk(dir)
}

func (l *lister) walk(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && len(entries) == 0 {
		return err
	}
	side := sideFiles{queues: map[string]bool{}, gates: map[string]bool{}}
	var locks []fs.DirEntry
	var subdirs []string
	for _, e := range entries {
		name := e.Name()
		isDir := e.Type().IsDir()
		if lock, ok := fairq.QueueOf(name, isDir); ok {
			if gated, ok := strings.CutSuffix(lock, dirlock.GateSuffix); ok {
				side.gates[filepath.Join(dir, gated)] = true
			} else {
				side.queues[filepath.Join(dir, lock)] = true
			}
			continue
		}
		switch {
		case lockpath.IsLockName(name) && (isDir || e.Type().IsRegular()):
			locks = append(locks, e)
		case isDir && !strings.HasSuffix(name, dirlock.GuardSuffix):
			subdirs = append(subdirs, filepath.Join(dir, name))
		}
	}
	regular := map[string]bool{}
	for _, e := range locks {
		if e.Type().IsRegular() {
			regular[e.Name()] = true
		}
	}
	listed := map[string]bool{}
	for _, e := range locks {
		path := filepath.Join(dir, e.Name())
		listed[path] = true
		if e.Type().IsRegular() && regular[e.Name()+lockpath.Suffix] {
			// A target named *.lock (yarn.lock) beside its companion
			// (yarn.lock.lock): one resource, one line, the
			// companion's, which also reports a holder of the file
			// itself (listLock), as hold status does.
			continue
		}
		if err := l.listLock(path, e, side); err != nil {
			l.report(err)
		}
	}
	// A queue whose lock file does not exist yet (its first waiter is
	// about to create it) still has waiters worth showing.
	for path := range side.queues {
		if sem, ok := strings.CutSuffix(path, flock.SlotsSuffix); ok && listed[sem] {
			// The queue of a semaphore listed above (see waiters).
			continue
		}
		if !listed[path] {
			if n, _ := fairq.Waiting(path); n > 0 {
				l.add(&hold.Status{Path: path, Protocol: "flock"}, n)
			}
		}
	}
	if err != nil {
		l.report(err)
	}
	if l.recursive {
		for _, sub := range subdirs {
			if err := l.walk(sub); err != nil {
				l.report(err)
			}
		}
	}
	return nil
}

// listLock inspects the lock at path and adds it, unless it is a *.lock
// file of another tool.
func (l *lister) listLock(path string, e fs.DirEntry, side sideFiles) error {
	var (
		st  *hold.Status
		err error
		use kernelUse
	)
	if lockpath.IsDirLockType(e.Type()) {
		st, err = hold.Inspect("", hold.LockFile(path), hold.WithProtocol(l.portable))
	} else {
		fi, ierr := e.Info()
		if ierr != nil {
			if errors.Is(ierr, fs.ErrNotExist) {
				return nil // gone since the directory was read
			}
			return ierr
		}
		if fi.Size() > 0 {
			// A file we cannot read may be anyone's: Inspect below
			// then says why it cannot tell. One that is locked is
			// listed whatever it holds. (The record first: the
			// kernel's table is read only when needed.)
			if ours, err := holdsRecord(path); err == nil && !ours && !l.kernel.use(fi).locked() {
				return nil
			}
		}
		// InspectAny: the file may have turned into a portable lock
		// since the directory was read.
		st, err = lockspec.InspectAny("", hold.LockFile(path))
		if err == nil && st.State != hold.Free {
			// Kernel waiters wait only for a held lock.
			use = l.kernel.use(fi)
		} else if err == nil {
			st, use = l.ownFileHolder(path, st)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, hold.ErrForeign) {
			// Gone, or not a lock at all (a directory of someone's
			// files): nothing to list.
			return nil
		}
		return err
	}
	l.add(st, l.waiters(st, use, side))
	return nil
}

// ownFileHolder returns the state of the target a free companion serves
// (path is "yarn.lock.lock", the target "yarn.lock") when that file is
// itself locked (by flock(1), or an earlier hold that locked it alone),
// at the file's path, as hold status reports it; else st, free.
func (l *lister) ownFileHolder(path string, st *hold.Status) (*hold.Status, kernelUse) {
	own := strings.TrimSuffix(path, lockpath.Suffix)
	if !lockpath.IsLockName(own) {
		return st, kernelUse{}
	}
	fi, err := os.Lstat(own)
	if err != nil || !fi.Mode().IsRegular() {
		return st, kernelUse{}
	}
	ost, err := lockspec.InspectAny("", hold.LockFile(own))
	if err != nil || ost.State == hold.Free {
		return st, kernelUse{}
	}
	return ost, l.kernel.use(fi)
}

// waiters counts who waits for the lock st describes.
func (l *lister) waiters(st *hold.Status, use kernelUse, side sideFiles) int {
	n := use.blocked
	if side.queues[st.Path] {
		if q, _ := fairq.Waiting(st.Path); q > 0 {
			n += q
			if use.blocked > 0 {
				// The head of the fair queue keeps its ticket while it
				// blocks on the lock itself: it was counted twice.
				n--
			}
		}
	}
	if st.Slots > 0 && side.queues[flock.CountPath(st.Path)] {
		// A semaphore's waiters queue for its slots.
		if q, _ := fairq.Waiting(flock.CountPath(st.Path)); q > 0 {
			n += q
		}
	}
	if side.gates[st.Path] {
		g, _ := fairq.Waiting(st.Path + dirlock.GateSuffix)
		if g > 0 && st.State == hold.HeldExclusive && heldFromHere(st.Holder) {
			// A holder on this machine keeps its place at the gate
			// until it lets go: it is not waiting.
			g--
		}
		n += g
	}
	return n
}

// heldFromHere reports a holder that is a live hold process on this host.
func heldFromHere(h *hold.Holder) bool {
	return h != nil && h.Owner != nil && h.Alive == hold.Alive && h.Owner.Host == proc.Hostname()
}

// holdsRecord reports whether the *.lock file at path holds an owner
// record of hold (or what is left of one): such a file is a lock even
// while nobody holds it. It reads the file's start without blocking and
// asks lock.HasRecordPrefix, which every record of hold's passes, and so
// does a record longer than what was read or one a crash tore: those are
// listed so that an operator sees them, although hold locks such a file
// only as --lock-file.
func holdsRecord(path string) (bool, error) {
	b, err := readHead(path, 2048)
	if err != nil {
		return false, err
	}
	return lock.HasRecordPrefix(b), nil
}

// listRemote lists the locks under an address-style PATH; spec carries
// the connection settings.
func (l *lister) listRemote(target string, spec *lockspec.Spec) error {
	proto, prefix, err := lockspec.ResolveList(target, spec)
	if err != nil {
		return err
	}
	defer lockspec.CloseProtocol(proto)
	ls, ok := proto.(lock.Lister)
	if !ok {
		return usagef("cannot list %s locks", proto.Name())
	}
	return ls.List(context.Background(), prefix, l.add)
}

// sideFilesOf looks for the queues beside the lock at path, for a lock
// found on its own rather than in a directory listing.
func sideFilesOf(path string) sideFiles {
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	side := sideFiles{queues: map[string]bool{}, gates: map[string]bool{}}
	side.queues[path] = exists(path+fairq.QueueFileSuffix) || exists(path+fairq.QueueSuffix)
	gate := path + dirlock.GateSuffix
	side.gates[path] = exists(gate+fairq.QueueFileSuffix) || exists(gate+fairq.QueueSuffix)
	return side
}
