package hold

// The options about a wait that could never end (see Option).

// FailIfHeldHere makes Acquire fail at once with an error matching
// ErrDeadlock, naming the holder, instead of waiting, when the lock is busy
// because this process itself holds it in a conflicting mode (exclusive,
// or shared while this request is exclusive). Use it where nothing in the
// process can release a lock while this call waits: a single-threaded
// program, or a synchronous caller blocked in the wait. Without it a
// process may wait for a lock that another of its goroutines holds, as
// two processes would. Do, Update and Append wait as Acquire does;
// TryAcquire, which never waits, accepts it and reports a busy lock with
// ErrBusy, so one list of options serves a try and then a wait.
func FailIfHeldHere() Option {
	return Option{kind: optFailIfHeldHere, set: func(c *config) { c.failIfHeldHere = true }}
}

// FailIfHeldBy makes Acquire fail at once with an error matching
// ErrDeadlock, naming the holder, instead of waiting, when the lock is busy
// because one of locks, still held, holds it in a conflicting mode. It is
// for a caller that holds those locks and will not release them while it
// waits: a thread of a client that knows which locks are its own (the
// Python client passes those of the calling thread), while locks of the
// process's other threads may be released meanwhile and are waited for.
// It applies where FailIfHeldHere does.
func FailIfHeldBy(locks ...*Lock) Option {
	return Option{kind: optFailIfHeldBy, set: func(c *config) { c.heldBy = append(c.heldBy, locks...) }}
}
