package cli

import "os"

// forwardedSignals are the signals hold catches. Windows delivers only
// Ctrl-C (os.Interrupt) to a console process.
var forwardedSignals = []os.Signal{os.Interrupt}
