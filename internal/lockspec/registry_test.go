package lockspec

import (
	"slices"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
)

// TestDefaultProtocolRegistered checks that the protocol a request gets
// when it names none is the library's default, under the name
// DefaultProtocol, and holds nothing open.
func TestDefaultProtocolRegistered(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	r, err := (&Spec{Target: "t"}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Proto != hold.DefaultProtocol() || r.Key.Protocol != DefaultProtocol || !r.Local() {
		t.Errorf("got protocol %v (key %q, local %v), want the library's default", r.Proto, r.Key.Protocol, r.Local())
	}
	if !slices.Contains(ProtocolNames(), DefaultProtocol) {
		t.Errorf("ProtocolNames %v lacks %q", ProtocolNames(), DefaultProtocol)
	}
	if s, ok := ProtocolSummary(DefaultProtocol); !ok || !strings.Contains(s, "(default)") {
		t.Errorf("summary %q, %v", s, ok)
	}
}

// TestRegisterTwicePanics: two registrations of one name would make the
// one that wins depend on the order of init functions.
func TestRegisterTwicePanics(t *testing.T) {
	for name, register := range map[string]func(){
		"protocol": func() { RegisterFixedProtocol(DefaultProtocol, "again", hold.DefaultProtocol()) },
		"scheme": func() {
			RegisterScheme("test-twice", nil)
			RegisterScheme("test-twice", nil)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering a %s twice did not panic", name)
				}
			}()
			register()
		}()
	}
	delete(schemes, "test-twice")
}

// TestAddressScheme checks which targets are addresses: a scheme before
// "://" with no path separator in it.
func TestAddressScheme(t *testing.T) {
	for target, want := range map[string]string{
		"etcd://h:2379/k":   "etcd",
		"postgres://u@h/db": "postgres",
		"data.txt":          "",
		"://x":              "",
		"dir/x://y":         "",
		`c:\x://y`:          "",
	} {
		if got := AddressScheme(target); got != want {
			t.Errorf("AddressScheme(%q) = %q, want %q", target, got, want)
		}
	}
}

// TestHandOffRefusesLoop: a companion handed a scheme it does not serve
// fails instead of handing the command line on again.
func TestHandOffRefusesLoop(t *testing.T) {
	if err := HandOffIfRemote("data.txt", "x://not-remote"); err != nil {
		t.Errorf("local targets: %v", err)
	}
	t.Setenv(RemoteEnv, "1")
	err := HandOffIfRemote("etcd://127.0.0.1:1/k")
	if err == nil || !strings.Contains(err.Error(), "does not serve the scheme it was handed") {
		t.Errorf("got %v", err)
	}
}

// TestSettings checks the names messages and flags list.
func TestSettings(t *testing.T) {
	if !IsSetting(EtcdTTL.Flag) || IsSetting("nope") {
		t.Error("IsSetting is wrong")
	}
	if got := SettingNames(); !strings.HasPrefix(got, "etcd-ca, etcd-cert") || !strings.HasSuffix(got, ", ttl") {
		t.Errorf("SettingNames = %q", got)
	}
}
