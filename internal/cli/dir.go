package cli

import (
	"sync"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// --protocol dir (or HOLD_PROTOCOL=dir): the portable directory lock. Its
// timing knobs come from the HOLD_DIR_* environment variables (see package
// portable): HOLD_DIR_STALE, HOLD_DIR_HEARTBEAT, HOLD_DIR_GRACE,
// HOLD_DIR_PATIENCE, HOLD_DIR_CEILING, HOLD_DIR_MAX_POLL.
func init() {
	registerProtocol("dir", "portable directory lock (mkdir TARGET.lock, as proper-lockfile and dir-lock), for NFS, SMB, FUSE and Node tools; tuned by HOLD_DIR_* variables",
		func() (hold.Protocol, error) { return dirProtocol(), nil })
}

// dirProtocol is the process's one portable protocol, made on first use.
// Every request shares it because the protocol knows the locks its own
// handles hold: a second one would see an agent's other live lock as a
// leftover of this process and judge it by age alone.
var dirProtocol = sync.OnceValue(func() hold.Protocol { return portable.New() })
