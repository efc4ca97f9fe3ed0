//go:build unix

package dirlock

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every step of acquire, reclaim and release at which a process can die.
var faultPoints = []string{
	faultAfterMkdir, faultAfterStamp, faultAfterReadBack,
	faultInGuard, faultJudged, faultReclaimMoved, faultGuardJudged,
	faultReleaseVerified, faultReleaseMoved, faultGateHeld,
}

// TestFaultPoints kills workers with SIGKILL at each step of the protocol
// while others contend for the lock. For every point: never two holders in
// the critical section (O_EXCL marker), no increment lost from a worker
// that survived, and the lock always recovers (every surviving worker
// finishes, and the lock can be taken afterwards).
//
// Worker 0 never dies, so the lock must be recovered for it to finish.
// The others die at the first pass of the point, and otherwise inside the
// critical section at their 2nd, 3rd or 4th acquisition (leaving more
// stale locks to reclaim). A round in which no worker reached the point is
// repeated; the point must be reached, or the test fails.
func TestFaultPoints(t *testing.T) {
	for _, point := range faultPoints {
		t.Run(point, func(t *testing.T) {
			for round := 1; ; round++ {
				if faultRound(t, point, false) {
					return
				}
				if round == 6 {
					t.Fatalf("no worker reached %s in %d rounds", point, round)
				}
			}
		})
	}
}

// TestSoftFileFaultPoints is TestFaultPoints for the file form
// (softfile.go), at the steps its claim, reclaim and release pass, with
// the seeded stale lock a dead filelock holder's file.
func TestSoftFileFaultPoints(t *testing.T) {
	for _, point := range []string{
		faultAfterStamp, faultAfterReadBack, faultInGuard, faultJudged, faultFileLocked,
		faultReclaimMoved, faultReleaseVerified, faultReleaseMoved, faultGateHeld,
	} {
		t.Run(point, func(t *testing.T) {
			for round := 1; ; round++ {
				if faultRound(t, point, true) {
					return
				}
				if round == 6 {
					t.Fatalf("no worker reached %s in %d rounds", point, round)
				}
			}
		})
	}
}

// faultRound runs one round and reports whether the point was reached;
// soft: the workers take the file form.
func faultRound(t *testing.T, point string, soft bool) bool {
	const workers, iters = 4, 12
	dir := t.TempDir()
	target := filepath.Join(dir, "counter")
	// The reclaim steps run only when there is a stale lock to reclaim,
	// and a guard is judged only when one was left behind: seed them (a
	// dead holder's lock; a guard left by a crashed reclaimer) so the
	// first contenders go straight through the point.
	switch {
	case soft && (point == faultInGuard || point == faultJudged || point == faultFileLocked || point == faultReclaimMoved):
		writeSoft(t, target+".lock", filelockRecord(deadPID(t)))
	case point == faultInGuard || point == faultJudged || point == faultReclaimMoved:
		stampDead(t, target+".lock", deadPID(t))
	case point == faultGuardJudged:
		stampDead(t, target+".lock", deadPID(t))
		os.Mkdir(target+".lock"+GuardSuffix, 0o777)
		backdate(t, target+".lock"+GuardSuffix, time.Minute)
	}
	ws := make([]*worker, workers)
	// The workers that may die start first; the one that never dies joins
	// a moment later, and must then recover whatever they left.
	for i := workers - 1; i >= 0; i-- {
		plan := ""
		if i > 0 {
			plan = fmt.Sprintf("%s:1,cs:%d", point, i+1)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		env := append([]string{envTarget + "=" + target, envIters + "=" + strconv.Itoa(iters), envFaults + "=" + plan}, fastEnv...)
		if soft {
			env = append(env, envSoft+"=1")
		}
		ws[i] = startWorker(t, "count", env...)
	}
	killed := 0
	for i, w := range ws {
		err := w.wait(t)
		switch {
		case err == nil:
		case killedBySignal(err) && i > 0:
			killed++
		default:
			t.Fatalf("worker %d: %v\n%s", i, err, w.stderr)
		}
	}
	n := checkCount(t, target)
	deaths, _ := os.ReadFile(target + ".deaths")
	reached := false
	sc := bufio.NewScanner(strings.NewReader(string(deaths)))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), point+" ") {
			reached = true
		}
	}
	if n < iters {
		t.Fatalf("the surviving worker cannot have finished: count %d", n)
	}
	// The lock recovers: whatever the dead left, it can be taken.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := New(fastConfig()).Acquire(ctx, request(target+".lock"))
	if err != nil {
		t.Fatalf("lock did not recover: %v", err)
	}
	h.Release()
	t.Logf("%d increments, %d workers killed; deaths: %s", n, killed, strings.ReplaceAll(strings.TrimSpace(string(deaths)), "\n", "; "))
	return reached
}

// Two reclaimers (processes) racing on a dead holder's lock: exactly one
// wins, repeated 100 times, ten races at a time.
func TestReclaimRaceProcesses(t *testing.T) {
	const reps, batch = 100, 10
	dead := deadPID(t)
	dir := t.TempDir()
	for b := 0; b < reps/batch; b++ {
		type race struct {
			path string
			ws   [2]*worker
		}
		var races []race
		for i := range batch {
			target := filepath.Join(dir, fmt.Sprintf("r%d-%d", b, i))
			stampDead(t, target+".lock", dead)
			r := race{path: target}
			for k := range 2 {
				r.ws[k] = startWorker(t, "try", envTarget+"="+target)
			}
			races = append(races, r)
		}
		for _, r := range races {
			for _, w := range r.ws {
				w.expect(t, "ready")
			}
		}
		for _, r := range races {
			for _, w := range r.ws {
				fmt.Fprintln(w.stdin, "go")
			}
		}
		for _, r := range races {
			won := 0
			for _, w := range r.ws {
				line := <-w.lines
				switch line {
				case "won":
					won++
				case "busy":
				default:
					w.wait(t)
					t.Fatalf("reclaimer said %q: %s", line, w.stderr)
				}
			}
			if won != 1 {
				t.Fatalf("%s: %d reclaimers won", r.path, won)
			}
			for _, w := range r.ws {
				w.stdin.Close()
				if err := w.wait(t); err != nil {
					t.Fatalf("reclaimer: %v\n%s", err, w.stderr)
				}
			}
		}
	}
}

func stampDead(t *testing.T, path string, pid int) {
	t.Helper()
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"pid":%d,"token":"dead","started_at":"2026-01-01T00:00:00Z"}`, pid)
	if err := os.WriteFile(filepath.Join(path, OwnerFile), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
}
