package lockspec

import (
	"errors"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/errkind"
)

// TestResolveRefuses checks the usage errors of Resolve, word for word:
// the command line and the agent both show them.
func TestResolveRefuses(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Target: "t", ConflictExit: 256}, "--conflict-exit-code must be between 0 and 255, not 256"},
		{Spec{Target: "t", Shared: true, Exclusive: true}, "--shared and --exclusive exclude each other"},
		{Spec{Target: "t", LockFile: "a", Name: "b"}, "--lock-file and --name exclude each other"},
		{Spec{}, "no TARGET given (or --lock-file PATH, or --name NAME)"},
		{Spec{Target: "t", Protocol: "nope", ProtocolGiven: true}, `unknown protocol "nope" (known: ` + ProtocolNames()[0]},
		{Spec{Target: "x://h/k", Name: "n"}, `--lock-file and --name do not apply to an address target like "x://h/k"`},
		{Spec{Target: "x://h/k"}, `unknown address scheme "x" in "x://h/k" (known: none)`},
	} {
		_, err := c.spec.Resolve()
		var usage *errkind.UsageError
		if !errors.As(err, &usage) {
			t.Errorf("%+v: got %v, want a usage error", c.spec, err)
			continue
		}
		if got := err.Error(); len(got) < len(c.want) || got[:len(c.want)] != c.want {
			t.Errorf("%+v: got %q, want %q", c.spec, got, c.want)
		}
	}
}

// TestResolveWait checks how a wait becomes Nonblock or Timeout.
func TestResolveWait(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	for _, c := range []struct {
		spec     Spec
		nonblock bool
		timeout  time.Duration
	}{
		{Spec{Target: "t"}, false, 0},
		{Spec{Target: "t", Nonblock: true}, true, 0},
		{Spec{Target: "t", WaitGiven: true}, true, 0},
		{Spec{Target: "t", WaitGiven: true, Wait: SecondsToWait(1.5)}, false, 1500 * time.Millisecond},
		{Spec{Target: "t", WaitGiven: true, Wait: SecondsToWait(1e-12)}, false, 1},
	} {
		r, err := c.spec.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if r.Nonblock != c.nonblock || r.Timeout != c.timeout {
			t.Errorf("%+v: got nonblock %v timeout %v, want %v %v", c.spec, r.Nonblock, r.Timeout, c.nonblock, c.timeout)
		}
	}
}

// TestResolveDefaultProtocol checks that only a protocol nobody chose
// warns of a machine-local lock, and that the key names the protocol
// resolved, however it was chosen.
func TestResolveDefaultProtocol(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	byDefault, err := (&Spec{Target: "t"}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	named, err := (&Spec{Target: "t", Protocol: DefaultProtocol, ProtocolGiven: true}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !byDefault.WarnMachineLocal || named.WarnMachineLocal {
		t.Errorf("WarnMachineLocal: by default %v, named %v; want true, false", byDefault.WarnMachineLocal, named.WarnMachineLocal)
	}
	if byDefault.Key != named.Key {
		t.Errorf("keys differ: %+v, %+v", byDefault.Key, named.Key)
	}
	t.Setenv(ProtocolEnv, DefaultProtocol)
	fromEnv, err := (&Spec{Target: "t"}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if fromEnv.WarnMachineLocal {
		t.Errorf("a protocol chosen by %s warns of a machine-local lock", ProtocolEnv)
	}
}

// TestSettingValue checks that a setting given with the request wins over
// its environment variable, even when given empty.
func TestSettingValue(t *testing.T) {
	t.Setenv(EtcdUser.Env, "from-env")
	if got := EtcdUser.Value(nil); got != "from-env" {
		t.Errorf("no request: got %q", got)
	}
	if got := EtcdUser.Value(&Spec{}); got != "from-env" {
		t.Errorf("not given: got %q", got)
	}
	if got := EtcdUser.Value(&Spec{Settings: Settings{EtcdUser.Flag: ""}}); got != "" {
		t.Errorf("given empty: got %q", got)
	}
}

// TestDialTimeout checks that a wait shortens the dial bound, and
// nonblock does not.
func TestDialTimeout(t *testing.T) {
	def := 5 * time.Second
	for _, c := range []struct {
		spec *Spec
		want time.Duration
	}{
		{nil, def},
		{&Spec{Nonblock: true}, def},
		{&Spec{WaitGiven: true}, def},
		{&Spec{WaitGiven: true, Wait: 2 * time.Second}, 2 * time.Second},
		{&Spec{WaitGiven: true, Wait: time.Minute}, def},
	} {
		if got := c.spec.DialTimeout(def); got != c.want {
			t.Errorf("%+v: got %v, want %v", c.spec, got, c.want)
		}
	}
}
