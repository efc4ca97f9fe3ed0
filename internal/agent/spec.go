package agent

import (
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// spec is the request's lock options as a lockspec.Spec, the type the
// command line fills from its flags, checked as the flags are: the agent
// accepts exactly what `hold run` accepts.
func (req *request) spec() (lockspec.Spec, error) {
	s := lockspec.Spec{
		Target:        req.Target,
		Shared:        req.Shared,
		Fair:          req.Fair,
		Protocol:      req.Protocol,
		ProtocolGiven: req.Protocol != "",
		LockFile:      req.LockFile,
		Name:          req.Name,
		// The client of the synchronous channel waits blocked: a lock
		// it holds cannot be released before its request ends.
		FailIfHeldHere: req.syncCaller,
		// The client is the agent's parent, which started it: deadlock
		// messages name the client's pid, not the agent's.
		Caller: clientPID(),
		// The locks the client's calling thread holds in its own
		// process (held_inproc): the library counts them as the
		// client's, for a deadlock with itself or in a cycle.
		CallerKeeps: req.callerKeeps(),
	}
	if req.Wait != nil {
		w := *req.Wait
		if w < 0 || w > 1e9 {
			return s, errkind.Usagef("wait must be a number of seconds >= 0, not %v", w)
		}
		s.Wait, s.WaitGiven = lockspec.SecondsToWait(w), true
	}
	s.MakeDirs = req.MakeDirs
	s.SoftFile = req.SoftFile
	if req.Slots != nil {
		s.Slots, s.SlotsGiven = *req.Slots, true
	}
	if req.Mode != nil {
		if *req.Mode <= 0 || *req.Mode > 0o777 {
			return s, errkind.Usagef("mode must be permission bits between 1 and 0o777 (511), not %d", *req.Mode)
		}
		s.Mode = fs.FileMode(*req.Mode)
	}
	if req.Stale != nil {
		st := *req.Stale
		if !(st > 0) || st > 1e9 {
			return s, errkind.Usagef("stale must be a number of seconds > 0, not %v", st)
		}
		s.Stale = lockspec.SecondsToWait(st)
	}
	if req.Heartbeat != nil {
		hb := *req.Heartbeat
		if !(hb > 0) || hb > 1e9 {
			return s, errkind.Usagef("heartbeat must be a number of seconds > 0, not %v", hb)
		}
		s.Heartbeat = lockspec.SecondsToWait(hb)
	}
	s.LostIfTouched = req.LostIfTouched
	if req.DeadlockAfter != nil {
		d := *req.DeadlockAfter
		if !(d >= 0) || d > 1e9 {
			return s, errkind.Usagef("deadlock_after must be a number of seconds >= 0, not %v", d)
		}
		s.DeadlockAfter, s.DeadlockAfterGiven = lockspec.SecondsToWait(d), true
	}
	if len(req.Fields) > 0 {
		s.Fields = make([]lockspec.Field, 0, len(req.Fields))
		for _, k := range slices.Sorted(maps.Keys(req.Fields)) {
			if k == "" {
				return s, errkind.Usagef("a field needs a name")
			}
			// As --field KEY=VALUE does, the first "=" ends the key.
			k, v, _ := strings.Cut(k+"="+req.Fields[k], "=")
			s.Fields = append(s.Fields, lockspec.Field{Key: k, Value: v})
		}
	}
	if len(req.Settings) > 0 {
		for _, k := range slices.Sorted(maps.Keys(req.Settings)) {
			if !lockspec.IsSetting(k) {
				return s, errkind.Usagef("unknown setting %q (known: %s)", k, lockspec.SettingNames())
			}
		}
		s.Settings = req.Settings
	}
	return s, nil
}

// resolve is spec, resolved: the lock to take, ready for hold.Acquire.
func (req *request) resolve() (*lockspec.Resolved, error) {
	s, err := req.spec()
	if err != nil {
		return nil, err
	}
	return s.Resolve()
}

// newLock is resolve into a new heldLock, which holds the resolved
// request while the lock is taken and held.
func (req *request) newLock() (*heldLock, error) {
	s, err := req.spec()
	if err != nil {
		return nil, err
	}
	al := &heldLock{lazy: req.Lazy, inproc: req.InProc}
	if err := s.ResolveInto(&al.spec); err != nil {
		return nil, err
	}
	return al, nil
}

// clientPID is the agent's client: its parent process, read at start (a
// parent that ends leaves the agent to another, whose pid says nothing).
var clientPID = sync.OnceValue(os.Getppid)
