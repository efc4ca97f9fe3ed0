package hold

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hold-dev/hold/internal/proc"
)

// Deadlocks with an ancestor. A process started by `hold run T -- …`
// (or `hold update`, or flock(1)) runs while its ancestor holds T's lock
// and waits for it to end: if it waits for that same lock, neither ever
// ends. That is certain, unlike a wait for a lock another process merely
// holds, so Acquire says so at once, without being asked: when the lock
// is busy and a holder the error names is such an ancestor.
//
// What cannot be told apart: a command that starts a nested `hold run T`
// in the background and ends at once (the ancestor then releases T, and
// the nested one gets it) is refused too, if it asks while its parent
// still runs. A parent that is not one of those runners (a Node or Python
// program holding T while it starts a child that waits for T) may release
// T at any time, so its child waits as usual.

// runners are this process's ancestors that run their command under a
// lock and wait for it, by pid, described for messages. Read once: an
// ancestor does not change, except that one which ends is gone.
var runners = sync.OnceValue(func() map[int]string {
	var m map[int]string
	for _, p := range proc.Ancestors() {
		if waitsForCommand(p.Args) {
			if m == nil {
				m = map[int]string{}
			}
			m[p.PID] = strings.Join(p.Args, " ")
		}
	}
	return m
})

// waitsForCommand reports whether args are those of a process that holds
// a lock while its command runs and waits for it: hold run, hold update
// (its command), flock(1).
func waitsForCommand(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch strings.TrimSuffix(filepath.Base(args[0]), ".exe") {
	case "flock":
		return true
	case "hold", "hold-remote", "hold-postgres":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			return a == "run" || a == "update"
		}
	}
	return false
}

// ancestorDeadlock returns the ErrDeadlock error for a request that found
// its lock busy (busy names the holder) when a holder is an ancestor that
// waits for this process; nil otherwise.
func ancestorDeadlock(req *Request, busy error) error {
	var be *Error
	if !errors.Is(busy, ErrBusy) || !errors.As(busy, &be) || be.Holder == nil {
		return nil
	}
	rs := runners()
	pids := be.Holder.PIDs
	if o := be.Holder.Owner; o != nil && o.PID > 0 && proc.Local(o) {
		pids = append(pids[:len(pids):len(pids)], o.PID)
	}
	for _, pid := range pids {
		if cmd, ok := rs[pid]; ok {
			return &Error{Op: "acquire", Path: req.Path, Err: ErrDeadlock, Holder: be.Holder,
				Hint: fmt.Sprintf("the holder, pid %d (%s), is an ancestor of this process that waits for it to end, so it cannot release the lock before this wait ends: do not take the lock again inside its own command", pid, shorten(cmd, 60))}
		}
	}
	return nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
