package tcplock_test

import (
	"os"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/examples/tcplock"
	"github.com/hold-dev/hold/holdtest"
)

// addrEnv tells the suite's worker processes where the server is.
const addrEnv = "TCPLOCK_ADDR"

var subject = holdtest.Subject{
	Name: "tcplock",
	Options: func() ([]hold.Option, func(), error) {
		return []hold.Option{hold.WithProtocol(&tcplock.Protocol{Addr: os.Getenv(addrEnv)})}, nil, nil
	},
	// The server frees a lock when its holder's connection closes.
	CrashFree: 0,
	NoTokens:  "",
	Lose: func(t *testing.T, l *hold.Lock) {
		p := &tcplock.Protocol{Addr: os.Getenv(addrEnv)}
		if err := p.Kick(l.Path()); err != nil {
			t.Fatal(err)
		}
	},
}

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(subject); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestConformanceTCPLock: a protocol written with hold's exported API
// alone passes hold's conformance suite.
func TestConformanceTCPLock(t *testing.T) {
	srv, err := tcplock.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv(addrEnv, srv.Addr())
	s := subject
	s.Env = []string{addrEnv + "=" + srv.Addr()}
	holdtest.Run(t, s)
}
