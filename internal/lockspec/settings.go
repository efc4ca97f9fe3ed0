package lockspec

import (
	"os"
	"strings"
)

// Setting is a connection setting of a network backend: a name, which is
// also its flag, and the environment variable used when the request does
// not give it. Secrets belong in the variable: a flag shows in process
// lists.
type Setting struct {
	Flag, Env, Usage string
}

// Value returns the setting as s gives it, else its environment variable.
// s may be nil.
func (st Setting) Value(s *Spec) string {
	if s != nil {
		if v, ok := s.Settings[st.Flag]; ok {
			return v
		}
	}
	return os.Getenv(st.Env)
}

// The etcd settings. They are defined here, not with the etcd backend, so
// that hold itself parses a command line that uses them before handing it
// over to the companion that links the backend.
var (
	EtcdCA       = Setting{"etcd-ca", "HOLD_ETCD_CA", "CA certificate `FILE` to verify etcd's servers (TLS)"}
	EtcdCert     = Setting{"etcd-cert", "HOLD_ETCD_CERT", "client certificate `FILE` for etcd (TLS)"}
	EtcdKey      = Setting{"etcd-key", "HOLD_ETCD_KEY", "client key `FILE` for etcd (TLS)"}
	EtcdUser     = Setting{"etcd-user", "HOLD_ETCD_USER", "etcd user `NAME`"}
	EtcdPassword = Setting{"etcd-password", "HOLD_ETCD_PASSWORD", "etcd `PASSWORD` (prefer the environment variable: a flag shows in process lists)"}
	EtcdTTL      = Setting{"ttl", "HOLD_ETCD_TTL", "lease TTL in `SECONDS` for etcd locks: how long a crashed holder blocks others, and how long a paused one keeps the lock"}
)

// EtcdDefaultTTL is the etcd package's DefaultTTL in seconds, repeated here
// for the flag's help text (hold-remote's tests check that they agree).
const EtcdDefaultTTL = 15

// RemoteSettings are every backend's settings.
var RemoteSettings = []Setting{EtcdCA, EtcdCert, EtcdKey, EtcdUser, EtcdPassword, EtcdTTL}

// IsSetting reports whether name is one of RemoteSettings.
func IsSetting(name string) bool {
	for _, s := range RemoteSettings {
		if s.Flag == name {
			return true
		}
	}
	return false
}

// SettingNames lists RemoteSettings' names, for messages.
func SettingNames() string {
	names := make([]string, len(RemoteSettings))
	for i, s := range RemoteSettings {
		names[i] = s.Flag
	}
	return strings.Join(names, ", ")
}
