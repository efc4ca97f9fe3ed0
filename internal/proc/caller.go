package proc

import "context"

// callerKey is the context key of WithCaller.
type callerKey struct{}

// WithCaller returns a copy of ctx saying that the lock a call with it
// asks for is asked on behalf of process pid: a program this process
// serves and that waits for its answers (hold agent's client, which is
// the agent's parent). The root's deadlock checks then name that program,
// not this process, as the one that holds or waits, and a lock kept by
// ancestors of pid that wait for it (`hold run T -- node app.js` whose
// app.js asks the agent for T) is a deadlock as if pid had asked itself.
// Zero or this process's own pid changes nothing. Only waits look at it:
// a try never waits, so it never deadlocks.
func WithCaller(ctx context.Context, pid int) context.Context {
	if pid <= 0 {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, pid)
}

// Caller returns the process WithCaller put in ctx, or 0.
func Caller(ctx context.Context) int {
	pid, _ := ctx.Value(callerKey{}).(int)
	return pid
}

// HeldFile is a kernel lock file, by its path and its device and inode,
// that the caller (WithCaller) holds in its own process.
type HeldFile struct {
	Path string
	FileKey
}

// callerKeepsKey is the context key of WithCallerKeeps.
type callerKeepsKey struct{}

// WithCallerKeeps returns a copy of ctx saying that the caller
// (WithCaller) holds the kernel locks of files in its own process and
// keeps them until the call with it returns: locks a thread of hold
// agent's client took itself (the Python client's in-process locks) and
// cannot release while it waits for the agent's answer. The root's
// deadlock checks then count them as the caller's, as the locks given to
// FailIfHeldBy are: a wait for one of them fails at once, and a wait
// entry claims them for the caller's process, so that a cycle through
// them is found.
func WithCallerKeeps(ctx context.Context, files []HeldFile) context.Context {
	if len(files) == 0 {
		return ctx
	}
	return context.WithValue(ctx, callerKeepsKey{}, files)
}

// CallerKeeps returns the files WithCallerKeeps put in ctx, or nil.
func CallerKeeps(ctx context.Context) []HeldFile {
	files, _ := ctx.Value(callerKeepsKey{}).([]HeldFile)
	return files
}
