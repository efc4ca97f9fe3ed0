// Package errkind sorts the errors of a lock request into kinds, in one
// place, so that the two ways hold reports them agree: the command line's
// exit statuses and the agent's reply codes are each a small table over
// these kinds. It also defines the errors hold's front ends make
// themselves: bad input, a command that could not start, a signal.
//
// It belongs to the front ends (the command line, the agent, their shared
// request code in lockspec) and sits on the library's public API: the
// errors it sorts are the ones package hold documents (hold.ErrBusy,
// hold.ErrFileNotRegular, ...), never an implementation package's, so
// that what a front end reports follows what the library promises.
package errkind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/hold-dev/hold"
)

// Kinds is a set of kinds. An error can be of several (a wrapped errno
// and a hold sentinel, say); each table picks by its own order, which is
// why Of reports them all instead of choosing one.
type Kinds uint32

// The kinds. Their meaning is that of the errors listed with each.
const (
	// Signal: a *SignalError, a wait or command ended by a signal.
	Signal Kinds = 1 << iota
	// Usage: a *UsageError, or a name, lock path or option hold refuses
	// (hold.ErrInvalidName, hold.ErrLockIsTarget, hold.ErrInvalidOption).
	Usage
	// Busy: hold.ErrBusy.
	Busy
	// Timeout: hold.ErrTimeout.
	Timeout
	// GaveUp: a wait that ended without the lock for another reason than
	// its deadline: the waiter's place (an etcd queue key, its lease) went
	// away while it waited, which a protocol reports as hold.ErrLost from
	// its acquire. No lock was held, so this is not Lost.
	GaveUp
	// Exec: an *ExecError, a command that could not be started.
	Exec
	// ReadOnly: a read-only filesystem (EROFS).
	ReadOnly
	// Full: a full filesystem or quota, or the system's own code for a
	// full or write-protected disk.
	Full
	// NotRegular: hold.ErrNotRegular, a lock path that is not a file.
	NotRegular
	// FileNotRegular: an updated or appended file that is not a regular
	// file (hold.ErrFileNotRegular).
	FileNotRegular
	// IsDir: EISDIR.
	IsDir
	// Foreign: hold.ErrForeign, something hold did not write.
	Foreign
	// NotExist: os.ErrNotExist.
	NotExist
	// Permission: os.ErrPermission.
	Permission
	// Unsupported: hold.ErrUnsupported.
	Unsupported
	// Lost: hold.ErrLost or hold.ErrReleased of a lock that was held.
	Lost
	// Canceled: context.Canceled, a wait abandoned.
	Canceled
	// Errno: any other operating-system error.
	Errno
	// Deadlock: hold.ErrDeadlock, a wait that could never end.
	Deadlock
	// Unavailable: hold.ErrUnavailable, a lock server (etcd,
	// PostgreSQL) that could not be reached.
	Unavailable
)

// Of returns every kind err is of; none for nil or an error hold knows
// nothing more about.
func Of(err error) Kinds {
	if err == nil {
		return 0
	}
	var (
		k     Kinds
		usage *UsageError
		exec  *ExecError
		sig   *SignalError
		errno syscall.Errno
	)
	set := func(kind Kinds, is bool) {
		if is {
			k |= kind
		}
	}
	set(Signal, errors.As(err, &sig))
	set(Usage, errors.As(err, &usage) || errors.Is(err, hold.ErrInvalidName) || errors.Is(err, hold.ErrLockIsTarget))
	set(Usage, errors.Is(err, hold.ErrInvalidOption) || errors.Is(err, hold.ErrSlotCount))
	set(Busy, errors.Is(err, hold.ErrBusy))
	set(Timeout, errors.Is(err, hold.ErrTimeout))
	set(Exec, errors.As(err, &exec))
	set(ReadOnly, errors.Is(err, syscall.EROFS))
	set(Full, errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || isFilesystemFullOS(err))
	set(NotRegular, errors.Is(err, hold.ErrNotRegular))
	set(FileNotRegular, errors.Is(err, hold.ErrFileNotRegular))
	set(IsDir, errors.Is(err, syscall.EISDIR))
	set(Foreign, errors.Is(err, hold.ErrForeign))
	set(NotExist, errors.Is(err, os.ErrNotExist))
	set(Permission, errors.Is(err, os.ErrPermission))
	set(Unsupported, errors.Is(err, hold.ErrUnsupported))
	gaveUp := errors.Is(err, hold.ErrLost) && fromAcquire(err)
	set(GaveUp, gaveUp)
	set(Lost, !gaveUp && (errors.Is(err, hold.ErrLost) || errors.Is(err, hold.ErrReleased)))
	set(Canceled, errors.Is(err, context.Canceled))
	set(Errno, errors.As(err, &errno))
	set(Deadlock, errors.Is(err, hold.ErrDeadlock))
	set(Unavailable, errors.Is(err, hold.ErrUnavailable))
	return k
}

// fromAcquire reports whether err is a hold error of an acquisition: of a
// waiter, not of a holder.
func fromAcquire(err error) bool {
	var he *hold.Error
	return errors.As(err, &he) && he.Op == "acquire"
}

// UsageError is bad input: a flag, an argument or a request field.
type UsageError struct{ Msg string }

// Error returns the message, which says what was wrong with the input.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// ExecError is a command that could not be started: hold run's, a
// filter, or a companion executable.
type ExecError struct {
	Cmd string
	Err error
}

// Error says which command could not run, and why.
func (e *ExecError) Error() string { return fmt.Sprintf("cannot run %s: %v", e.Cmd, e.Err) }

// Unwrap returns the reason the command could not start.
func (e *ExecError) Unwrap() error { return e.Err }

// SignalError ends a wait or a command that a signal interrupted.
type SignalError struct {
	Sig os.Signal
	Err error // the error of the interrupted operation, if any
}

// Error names the signal, and what the interrupted operation left.
func (e *SignalError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("interrupted by %v: %v", SignalName(e.Sig), e.Err)
	}
	return fmt.Sprintf("interrupted by %v", SignalName(e.Sig))
}

// Unwrap returns the error of the interrupted operation.
func (e *SignalError) Unwrap() error { return e.Err }
