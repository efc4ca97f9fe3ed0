package etcd

import "time"

// SetRevokeRetryFor shortens how long a failed revoke is retried in the
// background, for a test whose outage must outlast it; the returned
// function restores it.
func SetRevokeRetryFor(d time.Duration) (restore func()) {
	old := revokeRetryFor
	revokeRetryFor = d
	return func() { revokeRetryFor = old }
}

// RemoveKey runs the delete that a lost lock or an abandoned wait starts,
// for the key created at rev on p's current lease, waiting at most a
// second; it reports whether it finished in that time.
func RemoveKey(p *Protocol, key string, rev int64) bool {
	p.leaseMu.Lock()
	s := p.lease
	p.leaseMu.Unlock()
	return p.removeKey(key, rev, s, time.Second)
}
