package dirlock

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"1500":   1500 * time.Millisecond,
		"2.5":    2500 * time.Microsecond,
		" 250ms": 250 * time.Millisecond,
		"1.5s":   1500 * time.Millisecond,
		"1m":     time.Minute,
	}
	for in, want := range good {
		if d, ok := ParseDuration(in); !ok || d != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, d, ok, want)
		}
	}
	// Only finite positive values: a negative one would lower a floor
	// meant to be raised, an infinite one would stop locks aging out.
	for _, in := range []string{"", "0", "-5", "-1s", "0s", "NaN", "Inf", "+Inf", "-Inf", "1e300", "soon", "10 s"} {
		if d, ok := ParseDuration(in); ok {
			t.Errorf("ParseDuration(%q) accepted %v", in, d)
		}
	}
}

func TestResolve(t *testing.T) {
	env := map[string]string{}
	lookup := func(k string) string { return env[k] }

	c := Config{}.Resolve(lookup)
	if c.Stale != DefaultStale || c.Heartbeat != DefaultHeartbeat || c.Grace != DefaultGrace ||
		c.MaxPoll != DefaultMaxPoll || c.Patience != 0 || c.Ceiling != 0 {
		t.Fatalf("defaults: %+v", c)
	}

	// The environment overrides defaults; a bad value is ignored.
	env[EnvStale] = "30s"
	env[EnvGrace] = "-1"
	env[EnvPatience] = "200"
	c = Config{}.Resolve(lookup)
	if c.Stale != 30*time.Second || c.Grace != DefaultGrace || c.Patience != 200*time.Millisecond ||
		c.Ceiling != 2*time.Second {
		t.Fatalf("environment: %+v", c)
	}

	// An explicit value wins over the environment.
	c = Config{Stale: 5 * time.Second}.Resolve(lookup)
	if c.Stale != 5*time.Second {
		t.Fatalf("explicit stale: %+v", c)
	}

	// Stale is floored at Grace; the heartbeat is at most Stale/2.
	c = Config{Stale: time.Millisecond, Grace: 2 * time.Second, Heartbeat: time.Hour}.Resolve(lookup)
	if c.Stale != 2*time.Second || c.Heartbeat != time.Second {
		t.Fatalf("clamps: %+v", c)
	}
}
