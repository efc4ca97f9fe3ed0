package portable_test

import (
	"os"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/portable"
)

// conformanceStale is the conformance subject's StaleAfter: a killed
// holder's lock is taken over once its heartbeat is this old.
const conformanceStale = 2 * time.Second

var subject = holdtest.Subject{
	Name: "portable",
	Options: func() ([]hold.Option, func(), error) {
		p := portable.New(portable.StaleAfter(conformanceStale), portable.Heartbeat(conformanceStale/4))
		return []hold.Option{hold.WithProtocol(p)}, nil, nil
	},
	NoTokens:  "the lock directory is deleted on release, so no counter survives it",
	CrashFree: 2 * conformanceStale,
	Lose: func(t *testing.T, l *hold.Lock) {
		if err := os.RemoveAll(l.Path()); err != nil {
			t.Fatal(err)
		}
	},
	LockPath: func(target string) string { return target + ".lock" },
}

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(subject); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestConformancePortable(t *testing.T) { holdtest.Run(t, subject) }

// TestSemaphorePortable runs holdtest's semaphore checks on the portable
// protocol. A semaphore's directory is never deleted and keeps its token
// counter, so its tokens are checked, unlike the plain lock's.
func TestSemaphorePortable(t *testing.T) {
	s := subject
	s.NoTokens = ""
	if testenv.UnderWine() {
		s.StressSkip = "wine: the log of stays that the stress's workers append to, while some are killed mid-write, came out with an empty line, and once with 150 of its 3,200 completed stays missing, where Linux's never has: the replay cannot be trusted there (the other semaphore checks run)"
	}
	holdtest.RunSemaphore(t, s)
}
