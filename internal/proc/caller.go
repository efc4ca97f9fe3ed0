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
