package cli

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/nameddir"
	"github.com/hold-dev/hold/internal/testenv"
)

// namedTmpScript runs in a mount namespace of its own, with fresh tmpfs
// on /run/lock (where named locks live) and /tmp (an earlier place,
// /tmp/hold-UID), so that neither of the machine's is touched. It plants
// /tmp/hold-UID as $1 says (owner uid $2, mode $3), holds nightly.lock
// there with a record of its own, and prints what hold status --name,
// hold ls and hold run -n --name say of the name.
const namedTmpScript = `
set -e
mount -t tmpfs -o mode=1777 tmpfs /run/lock
mkdir /run/lock/work && cp "$HOLD" /run/lock/work/hold && cd /run/lock/work
mount -t tmpfs -o mode=1777 tmpfs /tmp
old=/tmp/hold-$(id -u)
mkdir -m "$3" "$old" && chmod "$3" "$old" && chown "$2" "$old"
./hold run --lock-file "$old/nightly.lock" --field forged=yes -c 'touch ready; i=0; while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done' &
i=0; while [ ! -e ready ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done
echo "status: $(./hold status --json --name nightly)"
echo "ls: $(./hold ls | tr '\n' ' ')"
./hold run -n --name nightly -- true && echo "run: 0" || echo "run: $?"
touch go; wait
`

// TestNamedLockPlantedInTmp is issue 38's case as another local user
// would make it: /tmp/hold-UID made by someone else (or left writable by
// all), with a lock held in it under a forged record. hold run -n --name
// skips the place, and so must hold status --name and hold ls; the same
// place made private by the user itself is still looked at (an older
// hold's holder there excludes the name).
func TestNamedLockPlantedInTmp(t *testing.T) {
	t.Parallel()
	unshare := testenv.LookPath(t, "unshare", "not installed (apt package util-linux)")
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace with its own /tmp needs root (CI runs as root)")
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != nameddir.TestEnv && k != "XDG_RUNTIME_DIR" && k != "TMPDIR" {
			env = append(env, kv)
		}
	}
	env = append(env, "HOLD="+holdBin)
	for _, c := range []struct {
		how, uid, mode string
		shown          bool
	}{
		{"another user's", "4242", "700", false},
		{"writable by others", "0", "777", false},
		{"the user's own", "0", "700", true},
	} {
		t.Run(c.how, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", namedTmpScript, "sh", c.how, c.uid, c.mode)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := string(out)
			lines := map[string]string{}
			for _, l := range strings.Split(got, "\n") {
				if k, v, ok := strings.Cut(l, ": "); ok {
					lines[k] = v
				}
			}
			held := strings.Contains(lines["status"], `"held":true`) && strings.Contains(lines["status"], "forged")
			listed := strings.Contains(lines["ls"], fmt.Sprintf("/tmp/hold-%d/nightly.lock", os.Getuid()))
			busy := lines["run"] == "1"
			if held != c.shown || listed != c.shown || busy != c.shown {
				t.Errorf("/tmp/hold-UID %s: status shows the planted lock: %v, ls lists it: %v, run -n finds it busy: %v; want %v for all three:\n%s",
					c.how, held, listed, busy, c.shown, got)
			}
		})
	}
}
