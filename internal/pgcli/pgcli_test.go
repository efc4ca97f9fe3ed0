package pgcli

import (
	"testing"

	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// TestResolveRefuses checks that an address the backend cannot parse is a
// usage error, found before any connection is tried.
func TestResolveRefuses(t *testing.T) {
	for _, target := range []string{"postgres://127.0.0.1:1/db", "postgres://127.0.0.1:1/db#"} {
		if _, _, err := resolvePostgres(target, &lockspec.Spec{Target: target}); errkind.Of(err)&errkind.Usage == 0 {
			t.Errorf("%s: got %v, want a usage error", target, err)
		}
	}
}

// TestRegister checks that Register makes lockspec serve both spellings
// of the scheme.
func TestRegister(t *testing.T) {
	Register()
	for _, scheme := range []string{"postgres", "postgresql"} {
		if !lockspec.Serves(scheme) {
			t.Errorf("Register did not register %s://", scheme)
		}
	}
}
