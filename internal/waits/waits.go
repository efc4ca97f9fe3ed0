// Package waits keeps the wait entries of this user's processes: what a
// process that has waited a while for a lock waits for, so that the other
// waiters of the machine can follow a chain of waits and find a deadlock
// between processes (internal/deadlock/cycle.go does).
//
// An entry is one small file in a directory private to the user, inside
// the named-lock directory (internal/nameddir): ".waits". A waiter writes
// its entry once, when its wait has lasted the detection delay, and
// removes it when the wait ends; a wait that ends sooner writes nothing.
// A waiter that crashed leaves its entry, which readers recognise as dead
// by the owner records' liveness rules (internal/proc's Judge: pid and
// start time, host, pid namespace and boot) and remove.
//
// Only the user's own entries are read: the directory must pass
// nameddir.CheckPrivate, and each entry must be a regular file owned by
// this user that nobody else may write. Another user cannot plant a wait
// that makes someone's wait look like a deadlock.
package waits

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hold-dev/hold/internal/nameddir"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Entry is one published wait.
type Entry struct {
	// Who waits: as an owner record names its holder.
	PID       int    `json:"pid"`
	ProcStart uint64 `json:"proc_start,omitempty"`
	Host      string `json:"host,omitempty"`
	PIDNS     uint64 `json:"pid_ns,omitempty"`
	BootID    string `json:"boot_id,omitempty"`
	// Command is the waiter's command line, for messages.
	Command string `json:"command,omitempty"`
	// Caller is the program the waiter asks for (hold.OnBehalfOf: the
	// agent's client), 0 for none, and CallerCommand its command line.
	Caller        int    `json:"caller,omitempty"`
	CallerCommand string `json:"caller_command,omitempty"`
	// What it waits for: the lock's protocol and identity (the root's
	// lockID), and its path as the waiter named it, for messages.
	Proto  string `json:"proto"`
	Lock   string `json:"lock"`
	Path   string `json:"path"`
	Shared bool   `json:"shared,omitempty"`
	// Since is when the wait began, in Unix nanoseconds: the youngest
	// wait of a cycle is the one that gives up.
	Since int64 `json:"since"`
	// Deadline, when not 0, is when the wait gives up by itself, in Unix
	// nanoseconds (a context with a deadline: hold run -w, a client's
	// timeout through the agent). Such a wait ends whatever the others
	// do, so no cycle through it is a deadlock: a chain of waits that
	// reaches it ends there.
	Deadline int64 `json:"deadline,omitempty"`
	// Holds lists the paths of the locks the wait keeps until it ends,
	// for messages, and Keeps their identities ("flock ino:8:1234", the
	// protocol and the root's lockID): the waiter's process stands for
	// this wait, in a chain of waits, only through a lock Keeps names,
	// unless KeepsAll says that nothing in the process can release any
	// lock before the wait ends (another thread of it may release what it
	// holds otherwise).
	Holds    []string `json:"holds,omitempty"`
	Keeps    []string `json:"keeps,omitempty"`
	KeepsAll bool     `json:"keeps_all,omitempty"`
	// CallerKeeps lists, as Keeps does, the locks that the Caller holds
	// in its own process and keeps until the wait ends (its Holds too):
	// the caller's process stands for this wait through them.
	CallerKeeps []string `json:"caller_keeps,omitempty"`

	// Name is the entry's file name (not stored in it).
	Name string `json:"-"`
}

// Owner returns the entry's waiter as an owner record, for the liveness
// rules.
func (e *Entry) Owner() *lock.Owner {
	return &lock.Owner{PID: e.PID, ProcStart: e.ProcStart, Host: e.Host, PIDNS: e.PIDNS, BootID: e.BootID}
}

// Self returns an entry naming this process as the waiter, without what
// it waits for.
func Self() Entry {
	o := proc.SelfShared()
	ns, boot := proc.Where()
	return Entry{PID: o.PID, ProcStart: o.ProcStart, Host: o.Host, PIDNS: ns, BootID: boot,
		Command: strings.Join(o.Command, " ")}
}

// sub is the entries' directory inside the named-lock directory.
const sub = ".waits"

// Dir returns the directory of this user's wait entries, without making
// or checking it.
func Dir() (string, error) {
	d, err := nameddir.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, sub), nil
}

// seq tells apart the entries of one process's concurrent waits.
var seq atomic.Uint64

// Publish writes e as a new entry and returns its name, for Remove. The
// directory is made (mode 0700) if needed and must be private: an error
// says what is wrong with it otherwise.
func Publish(e *Entry) (string, error) {
	dir, err := ensureDir()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%d-%d-%d.json", e.PID, e.Since, seq.Add(1))
	// Written under a temporary name and renamed, so that a reader
	// never sees half an entry.
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return name, nil
}

// Remove removes the entry called name; one already gone is no error.
func Remove(name string) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ensureDir makes the named-lock directory and the entries' directory
// inside it where missing, both private, and returns the latter.
func ensureDir() (string, error) {
	parent, err := nameddir.Dir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(parent, sub)
	for _, d := range []string{parent, dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return "", err
		}
		if err := nameddir.CheckPrivate(d); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// List returns the live entries of this user's processes on this machine
// (this process's own included). Entries another user could have
// written are skipped, and so is everything when the directory itself is
// not private; an entry whose waiter is dead is removed. A directory
// that does not exist holds no entry.
func List() []Entry {
	dir, err := Dir()
	if err != nil || nameddir.CheckPrivate(dir) != nil {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Entry
	for _, de := range ents {
		name := de.Name()
		if !de.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(dir, name)
		e, ok := read(path)
		if !ok {
			continue
		}
		switch proc.Judge(e.Owner()) {
		case lock.Dead:
			os.Remove(path)
			continue
		case lock.LivenessUnknown:
			continue
		}
		e.Name = name
		out = append(out, e)
	}
	return out
}

// read reads the entry at path, when it is this user's own: a regular
// file (not a link), owned by this user, writable by nobody else.
func read(path string) (Entry, bool) {
	f, err := openOwn(path)
	if err != nil {
		return Entry{}, false
	}
	defer f.Close()
	var e Entry
	dec := json.NewDecoder(f)
	if err := dec.Decode(&e); err != nil || e.PID <= 0 || e.Lock == "" {
		return Entry{}, false
	}
	return e, true
}
