package cli

import (
	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// --protocol dir (or HOLD_PROTOCOL=dir): the portable directory lock. Its
// timing knobs come from the HOLD_DIR_* environment variables (see package
// portable): HOLD_DIR_STALE, HOLD_DIR_HEARTBEAT, HOLD_DIR_GRACE,
// HOLD_DIR_PATIENCE, HOLD_DIR_CEILING, HOLD_DIR_MAX_POLL.
func init() {
	registerProtocol("dir", "portable directory lock (mkdir TARGET.lock, as proper-lockfile and dir-lock), for NFS, SMB, FUSE and Node tools; tuned by HOLD_DIR_* variables",
		func() (hold.Protocol, error) { return portable.New(), nil })
}
