package cli

import (
	"os"

	"github.com/hold-dev/hold/internal/agent"
)

func init() {
	register(&command{
		name:    "agent",
		summary: "serve lock requests as JSON lines on stdin/stdout, for programs in other languages",
		usage:   "agent [--for DESCRIPTION]",
		help: `
Reads one JSON request per line on stdin and writes one JSON reply (or
event) per line on stdout; docs/agent.md describes the protocol. Requests
carry ids, several may be outstanding, and a wait can be cancelled. A
client may also ask, in its hello, for a synchronous channel: two FIFOs on
which it writes a request and blocks reading its reply (µs for a try or a
release; as long as a wait lasts for an acquire).

When stdin reaches end of file (the client exited or crashed), the agent
abandons its waits, releases every lock it holds and exits 0; SIGTERM does
the same. SIGINT and SIGHUP are ignored: they reach the whole process group
of a terminal, and the client decides when the agent ends.

--for describes the client (e.g. "app.js, node pid 4200"); it becomes part
of the agent's command line, which is what holder messages and 'hold
status' show for the agent's locks.`,
		run: runAgent,
	})
}

func runAgent(args []string) int {
	fs := newFlagSet("agent", true)
	fs.String("for", "", "describe the client as `DESCRIPTION` (e.g. \"app.js, node pid 4200\") in holder messages and 'hold status'")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 0 {
		return fail("agent", usagef("agent takes no arguments; it reads requests on stdin"), exitUsage)
	}
	terminate, stop := agentSignals()
	defer stop()
	agent.Serve(os.Stdin, os.Stdout, terminate, agent.Options{
		Client:  fs.Lookup("for").Value.String(),
		Version: version(),
	})
	return 0
}
