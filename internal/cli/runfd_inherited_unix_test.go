//go:build unix

package cli

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Issue 53: `exec 7>&-; hold run -n 7` exited 0, having locked a
// descriptor the Go runtime opened at 7 in hold's own process (its cgroup
// files, epoll, eventfd, pidfds sit at 3 to 11 or so, depending on the
// Go release). The descriptor form locks only what the shell passed: any
// number the shell has closed is "not open" (65), for -u too.
func TestDescriptorFormLocksOnlyWhatTheShellPassed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The test's hold processes inherit 0, 1 and 2, and what this
	// process inherited itself and passes on (a descriptor without
	// close-on-exec, which whatever started go test may have left):
	// every other number is closed in what started them, as after
	// exec N>&-.
	for fd := 3; fd <= 24; fd++ {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			continue // passed on to hold: the shell's, for all it knows
		}
		for _, form := range [][]string{{"run", "-n"}, {"run", "-u"}, {"run", "-s", "-w", "5"}} {
			args := append(form, strconv.Itoa(fd))
			r := runHold(t, dir, args...)
			if want := "descriptor " + strconv.Itoa(fd) + ": not open"; r.code != exitLockError || !strings.Contains(r.stderr, want) {
				t.Errorf("hold %v with descriptor %d closed: exit %d, want %d saying %q: %s", args, fd, r.code, exitLockError, want, r.stderr)
			}
		}
	}
	// As the issue ran it, through a shell; and a descriptor the shell
	// did open is still locked: the lock is busy for another opener.
	r := runBounded(t, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `exec 7>&-; "$0" run -n 7; echo "closed=$?"
			exec 7>F; "$0" run -n 7; echo "open=$?"; "$0" run -n --lock-file F -- true; echo "other=$?"`, holdBin)
		cmd.Dir = dir
		return cmd
	})
	if want := "closed=65\nopen=0\nother=1\n"; r.stdout != want {
		t.Errorf("through a shell: %q, want %q; stderr: %s", r.stdout, want, r.stderr)
	}
}
