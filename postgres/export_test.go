package postgres

// SetBeforeTerminate has f run inside Break between its reading of the
// holder and its ending of the holder's session; the returned function
// undoes it.
func SetBeforeTerminate(f func()) (restore func()) {
	old := beforeTerminate
	beforeTerminate = f
	return func() { beforeTerminate = old }
}
