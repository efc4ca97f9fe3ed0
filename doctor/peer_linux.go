package doctor

import "golang.org/x/sys/unix"

// ofdSetlk is F_OFD_SETLK: see fcntlTryLock.
const ofdSetlk = unix.F_OFD_SETLK
