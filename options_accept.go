package hold

import (
	"math/bits"
	"strings"
)

// Where each option applies: the one table of it. An entry point refuses
// an option that is not listed for it, with ErrInvalidOption, before it
// touches anything, rather than ignoring it: AllowSplit given to Append,
// or MustExist given to Acquire, is a mistake its caller should hear of.
//
// An option that says which lock is meant (its path, its protocol, the
// fair queue in front of it, a logger) applies wherever a lock is named,
// so that one list of options can take a lock, inspect it and break it.
// An option about taking the lock or the record it publishes applies
// where a lock is taken, Update and Append included (they take one). What
// Update and Append may do to their file applies to them alone.

// entry is a set of the entry points that take options.
type entry uint16

// The entry points. Do is its own, so that a refusal
// names the function that was called.
const (
	inAcquire entry = 1 << iota
	inTryAcquire
	inDo
	inUpdate
	inAppend
	inInspect
	inBreak
)

// entryNames are the entry points' names, by bit.
var entryNames = [...]string{"Acquire", "TryAcquire", "Do", "Update", "Append", "Inspect", "Break"}

// The groups of entry points the table uses.
const (
	// locating: every entry point that names a lock.
	locating = inAcquire | inTryAcquire | inDo | inUpdate | inAppend | inInspect | inBreak
	// taking: every entry point that takes a lock.
	taking = inAcquire | inTryAcquire | inDo | inUpdate | inAppend
	// holding: the entry points whose caller holds the lock it asked for.
	holding = inAcquire | inTryAcquire | inDo
)

// optionKind names an option in the table.
type optionKind uint8

// The options, as the table knows them.
const (
	optLockFile optionKind = iota
	optNamed
	optForRewrite
	optWithProtocol
	optFair
	optShared
	optStopWithin
	optStaleAfter
	optHeartbeat
	optLostIfTouched
	optRefuseMachineLocal
	optMakeDirs
	optLockFileMode
	optFailIfHeldHere
	optFailIfHeldBy
	optDeadlockAfter
	optField
	optOmitCommand
	optMustExist
	optAllowEmpty
	optAllowSplit
	optAllowOwnerChange
	optLogger
	optSlots
	optSoftFile
	numOptionKinds
)

// accepts is, for each option, its name, the entry points it applies to,
// and, for one that some entry points taking a lock refuse, why (for the
// refusal's hint; Inspect and Break refuse what they refuse because they
// take no lock).
//
// FailIfHeldHere and FailIfHeldBy are accepted by TryAcquire, which never
// waits and so never deadlocks: a caller can pass one list to a try and
// then to a wait (the agent does).
var accepts = [numOptionKinds]struct {
	name string
	in   entry
	why  string
}{
	optLockFile:           {"LockFile", locating, ""},
	optNamed:              {"Named", locating, ""},
	optForRewrite:         {"ForRewrite", locating, ""},
	optWithProtocol:       {"WithProtocol", locating, ""},
	optFair:               {"Fair", locating, ""},
	optShared:             {"Shared", holding, "Update and Append always take the exclusive lock: two writers under a shared one would read the same old content"},
	optStopWithin:         {"StopWithin", taking, ""},
	optStaleAfter:         {"StaleAfter", taking | inInspect, ""},
	optHeartbeat:          {"Heartbeat", taking, ""},
	optLostIfTouched:      {"LostIfTouched", taking, ""},
	optRefuseMachineLocal: {"RefuseMachineLocal", taking, ""},
	optMakeDirs:           {"MakeDirs", taking, ""},
	optLockFileMode:       {"LockFileMode", taking, ""},
	optFailIfHeldHere:     {"FailIfHeldHere", taking, ""},
	optFailIfHeldBy:       {"FailIfHeldBy", taking, ""},
	optDeadlockAfter:      {"DeadlockAfter", taking, ""},
	optField:              {"Field", taking, ""},
	optOmitCommand:        {"OmitCommand", taking, ""},
	optMustExist:          {"MustExist", inUpdate | inAppend, "it is about the file that Update and Append change, and a lock file is created whatever it says"},
	optAllowEmpty:         {"AllowEmpty", inUpdate, "only Update replaces the file's content; Append adds to it"},
	optAllowSplit:         {"AllowSplit", inUpdate, "only Update replaces the file; Append writes in place, so it never splits a hard link"},
	optAllowOwnerChange:   {"AllowOwnerChange", inUpdate, "only Update replaces the file; Append writes in place, so the file keeps its owner"},
	optLogger:             {"Logger", locating, ""},
	optSlots:              {"Slots", holding, "Update and Append take the lock itself: a guarded write under one slot of several would not be alone"},
	optSoftFile:           {"SoftFile", taking, ""},
}

// opName is the Op of an entry point's errors.
func (e entry) opName() string {
	switch e {
	case inAcquire, inTryAcquire, inDo:
		return "acquire"
	case inInspect:
		return "inspect"
	}
	return strings.ToLower(e.String())
}

// String lists the entry points in e, by name.
func (e entry) String() string {
	var names []string
	for e != 0 {
		i := bits.TrailingZeros16(uint16(e))
		names = append(names, entryNames[i])
		e &^= 1 << i
	}
	return strings.Join(names, ", ")
}

// refuseOption is the error of an entry point in given option k, which
// does not apply to it: which option, which entry point, why not, and
// where it does apply.
func refuseOption(in entry, target string, k optionKind) error {
	a := accepts[k]
	why := a.why
	switch in {
	case inInspect:
		why = in.String() + " only looks at the lock: it takes none and changes no file"
	case inBreak:
		why = "Break removes a lock without taking it, and changes no file"
	}
	return &Error{Op: in.opName(), Path: target, Err: &optionError{option: a.name, entry: in.String()},
		Hint: why + "; leave " + a.name + " out here: it applies to " + a.in.String()}
}

// optionError is refuseOption's cause; it matches ErrInvalidOption.
type optionError struct{ option, entry string }

func (e *optionError) Error() string {
	return "hold." + e.option + " does not apply to hold." + e.entry
}

func (e *optionError) Is(target error) bool { return target == ErrInvalidOption }
