//go:build !unix

package holdtest

import "os"

// freeze cannot stop a process here without a debugger's rights: the kill
// comes at once, and a stay that began after the worker's last report may
// end after its "kill" line (see the stress check).
func freeze(*os.Process) {}
