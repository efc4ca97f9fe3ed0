package postgres

import "github.com/hold-dev/hold/lock"

// SetBeforeTerminate has f run inside Break between its reading of the
// holder and its ending of the holder's session; the returned function
// undoes it.
func SetBeforeTerminate(f func()) (restore func()) {
	old := beforeTerminate
	beforeTerminate = f
	return func() { beforeTerminate = old }
}

// BusyError is the error a wait for name that ended now would return,
// with the holder the server names.
func BusyError(p *Protocol, name string) *lock.Error {
	return p.busy(name, &lock.Error{Op: "acquire", Path: name, Err: lock.ErrTimeout})
}
