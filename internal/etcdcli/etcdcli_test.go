package etcdcli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// hold's help text repeats the etcd package's default TTL, since hold does
// not link the package; this keeps the two in step.
func TestEtcdDefaultTTLMatches(t *testing.T) {
	if got, want := time.Duration(lockspec.EtcdDefaultTTL)*time.Second, etcd.DefaultTTL; got != want {
		t.Fatalf("lockspec.EtcdDefaultTTL is %v, etcd.DefaultTTL is %v", got, want)
	}
}

// TestResolveRefuses checks that bad settings are usage errors, found
// before any connection is tried.
func TestResolveRefuses(t *testing.T) {
	for _, c := range []struct {
		target   string
		settings lockspec.Settings
		want     string
	}{
		{"etcd://127.0.0.1:1/k", lockspec.Settings{lockspec.EtcdTTL.Flag: "0.5"}, "--ttl wants a number of seconds between 1 and 86400"},
		{"etcd://127.0.0.1:1/k", lockspec.Settings{lockspec.EtcdUser.Flag: "u", lockspec.EtcdPassword.Flag: ""}, "etcd needs both a user and a password"},
	} {
		_, _, err := resolveEtcd(c.target, &lockspec.Spec{Target: c.target, Settings: c.settings})
		var usage *errkind.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want a usage error saying %q", c.target, c.settings, err, c.want)
		}
	}
	if _, _, err := resolveEtcd("etcd://", nil); errkind.Of(err)&errkind.Usage == 0 {
		t.Errorf("an address without endpoints: got %v, want a usage error", err)
	}
}

// TestRegister checks that Register makes lockspec serve the scheme.
func TestRegister(t *testing.T) {
	if lockspec.Serves("etcd") {
		t.Fatal("etcd is served before Register")
	}
	Register()
	if !lockspec.Serves("etcd") {
		t.Error("Register did not register etcd://")
	}
}
