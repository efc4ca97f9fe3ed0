package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/faultnet"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// trialsEnv sets how many trials of each command TestRemoteLossTrials
// runs per protocol: a few by default, so that CI stays within its budget;
// HOLD_TEST_TRIALS=20 makes twenty.
const trialsEnv = "HOLD_TEST_TRIALS"

func trialCount(t *testing.T) int {
	if v := os.Getenv(trialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", trialsEnv, v)
		}
		return n
	}
	return 1
}

// The lease and session bounds of the trials, short so that a trial takes
// seconds, and the kill-after grace: hold run asks for StopWithin
// kill-after + 1s, which the bounds must leave room for.
const (
	trialTTL         = "5"    // etcd --ttl, seconds
	trialIdleTimeout = "6000" // PostgreSQL idle_session_timeout, ms
	trialKillAfter   = "0.5"
	// How early the protocols say they told the holder: StopWithin
	// (kill-after + 0.5 s) and their safety margin (2 s + a twentieth
	// of the bound). The companion hold hands the command line to must
	// have passed StopWithin on.
	etcdTold = "3.25s"
	pgTold   = "3.3s"
)

// TestRemoteLossTrials: `hold run` holding an etcd or PostgreSQL lock is
// partitioned from the server past the lease (etcd: behind a proxy that
// stops forwarding; PostgreSQL: in a network namespace whose link is cut),
// with each of the three commands (one that obeys SIGTERM, one that
// ignores it, a -c line whose writer is a grandchild). In every trial the
// old command's last write comes before the new holder's first, no
// process of the old command is left, and the old hold exits 65 (lost).
func TestRemoteLossTrials(t *testing.T) {
	if testing.Short() {
		t.Skip("partitions real servers")
	}
	n := trialCount(t)
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		direct := startEtcd(t)
		for _, c := range stopCommands {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				for i := range n {
					px, err := faultnet.NewProxy(direct)
					if err != nil {
						t.Fatal(err)
					}
					key := fmt.Sprintf("trial/%d-%d", os.Getpid(), time.Now().UnixNano())
					holder := []string{holdBin, "run", "--ttl", trialTTL, "--kill-after", trialKillAfter,
						"etcd://" + px.Addr() + "/" + key, "-c", c.script}
					waiter := []string{"run", "-w", "40", "etcd://" + direct + "/" + key}
					lossTrial(t, i, holder, waiter, etcdTold, px.Cut)
					px.Close()
				}
			})
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		if _, err := pgtest.FindBin(); err != nil {
			testenv.MissingTool(t, "PostgreSQL", err.Error())
		}
		// One namespace per command, so that the three run side by side;
		// the server listens on each link's host address.
		links := make([]*faultnet.Link, len(stopCommands))
		var hosts []string
		for i := range links {
			l, err := faultnet.NewLink()
			if err != nil {
				testenv.MissingTool(t, "network namespaces", err.Error())
			}
			t.Cleanup(func() { l.Close() })
			links[i], hosts = l, append(hosts, l.HostIP)
		}
		srv, err := pgtest.StartListening(hosts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		for ci, c := range stopCommands {
			link := links[ci]
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				for i := range n {
					name := fmt.Sprintf("trial-%d-%d", os.Getpid(), time.Now().UnixNano())
					via := srv.URLVia(link.HostIP, srv.Port, "postgres") + "&idle_session_timeout=" + trialIdleTimeout + "#" + name
					holder := link.Wrap(holdBin, "run", "--kill-after", trialKillAfter, via, "-c", c.script)
					waiter := []string{"run", "-w", "40", srv.ConnString() + "#" + name}
					lossTrial(t, i, holder, waiter, pgTold, func() {
						if err := link.Cut(); err != nil {
							t.Fatal(err)
						}
					})
					if err := link.Heal(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	})
}

// lossTrial runs holder (a command line whose command writes "date
// +%s%N" lines to ./log after touching ./ready), cuts it off, runs the
// waiter, whose command writes "new" lines to the same log, and checks
// the order of the writes and that the old command is gone.
func lossTrial(t *testing.T, trial int, holder, waiter []string, told string, cut func()) {
	t.Helper()
	dir := t.TempDir()
	marker := fmt.Sprintf("trial-%d-%d", os.Getpid(), time.Now().UnixNano())
	hcmd, herr := startMarkedCmd(t, marker, dir, nil, holder...)
	waitFor(t, filepath.Join(dir, "ready"))
	time.Sleep(200 * time.Millisecond) // a few writes of the old command
	cutAt := time.Now()
	cut()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := exec.CommandContext(ctx, holdBin, append(waiter, "-c", `echo "new $(date +%s%N)" >> log`)...)
	w.Dir = dir
	out, err := w.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("trial %d: waiter: %v: %s", trial, err, out)
	}
	tookWaiter := time.Since(cutAt)
	code := waitExit(t, hcmd)
	if code != exitLockError {
		t.Errorf("trial %d: holder: exit %d, want %d (lost): %s", trial, code, exitLockError, herr.String())
	}
	if pids := markedAlive(marker); len(pids) > 0 {
		t.Errorf("trial %d: processes of the old command still alive: %v", trial, pids)
	}
	lastOld, firstNew := logOrder(t, filepath.Join(dir, "log"))
	if lastOld >= firstNew {
		t.Errorf("trial %d: the old command wrote %v after the new holder's first write; holder's stderr:\n%s", trial, time.Duration(lastOld-firstNew), herr.String())
	}
	// The protocol, in the companion hold handed the command line to,
	// got hold run's StopWithin (kill-after + reap allowance) and says
	// how early it told the holder.
	if msg := herr.String(); !strings.Contains(msg, "told "+told+" before that to stop") || !strings.Contains(msg, "SIGKILL") {
		t.Errorf("trial %d: the holder's stderr does not say it was told %s early, and that it kills: %q", trial, told, msg)
	}
	trialsMu.Lock()
	defer trialsMu.Unlock()
	t.Logf("trial %d: the waiter had the lock %s after the cut; the old command's last write came %s before the new holder's first",
		trial, tookWaiter.Round(time.Millisecond), time.Duration(firstNew-lastOld).Round(time.Millisecond))
}

var trialsMu sync.Mutex

// logOrder reads a log of "NANOS" (old command) and "new NANOS" lines and
// returns the old command's last write and the new holder's first.
func logOrder(t *testing.T, path string) (lastOld, firstNew int64) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, path)), "\n") {
		ts, isNew := strings.CutPrefix(line, "new ")
		n, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
		if err != nil {
			t.Fatalf("log line %q", line)
		}
		switch {
		case !isNew:
			lastOld = max(lastOld, n)
		case firstNew == 0:
			firstNew = n
		}
	}
	if lastOld == 0 || firstNew == 0 {
		t.Fatalf("log lacks the old or the new holder's writes:\n%s", readFile(t, path))
	}
	return lastOld, firstNew
}
