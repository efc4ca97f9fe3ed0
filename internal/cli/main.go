// Package cli is the hold command: every subcommand, its flags and its exit
// statuses. Two executables are built from it. cmd/hold is the one users run;
// it links only the local protocols, so that it starts as fast as flock(1).
// cmd/hold-remote adds the network backends (etcd://, postgres:// targets),
// cmd/hold-postgres only PostgreSQL's, and hold hands a command line with
// such a target over to one of them (see internal/lockspec's handoff.go).
//
//	hold run [flags] TARGET -- COMMAND [ARGS...]
//	hold run [flags] TARGET -c 'shell command'
//	hold status [--json] TARGET...
//	hold demo [-n WRITERS] [-m RECORDS]
//
// Its flags and exit codes follow flock(1); see `hold help` and docs/cli.md.
// Every subcommand lives in its own file and registers itself from init();
// lockflags.go explains how to add one.
package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hold-dev/hold/internal/gnuflag"
)

// command is one subcommand of hold.
type command struct {
	// name is the word after "hold", e.g. "run".
	name string
	// summary is one line for the list of commands in `hold help`.
	summary string
	// usage is the synopsis, without "hold ": "run [flags] TARGET -- COMMAND".
	// Several forms go on separate lines.
	usage string
	// help is printed after the flags by `hold help CMD` (and by
	// `hold CMD --help` when brief is nil): what the command does beyond
	// the flags, its exit status, caveats.
	help string
	// brief, when set, makes `hold CMD --help` one screen: the usage,
	// the summary, only the flags named here (long names, in this order:
	// first flock(1)'s, then, after an empty name, the most used of
	// hold's own), the exit statuses in brief and where the rest is.
	// `hold help CMD`, the man page and docs/cli.md keep everything.
	brief []string
	// hidden commands are internal (e.g. the demo's writer processes) and
	// are not listed in `hold help`.
	hidden bool
	// run executes the command with the arguments after its name and
	// returns the process exit status. It parses its own flags with
	// newFlagSet, so that `hold CMD --help` shows exactly its flags.
	run func(args []string) int
}

// commands holds every subcommand, filled by the init functions of the
// files that define them and only read afterwards.
var commands = map[string]*command{}

// register adds a subcommand. Call it from an init function in the
// subcommand's own file.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("hold: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

// Main runs the hold command with the process's arguments and returns its
// exit status, for the executables' main functions to pass to os.Exit.
func Main() int {
	return dispatch(os.Args[1:])
}

// dispatch runs the subcommand named by args[0] and returns the exit status.
func dispatch(args []string) int {
	if len(args) == 0 {
		printUsage(os.Stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				helpInFull = true
				return c.run([]string{"--help"})
			}
			fmt.Fprintln(os.Stderr, unknownCommand(args[1:]))
			return exitUsage
		}
		printUsage(os.Stdout)
		return 0
	case "--version":
		return runVersion(nil)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintln(os.Stderr, unknownCommand(args))
		return exitUsage
	}
	return c.run(args[1:])
}

// unknownCommand says, in one line, what is wrong with a command line
// whose first word is not a command: flags put before the command
// (`hold -n run T`, flock(1)'s order), or a mistyped command.
func unknownCommand(args []string) string {
	if strings.HasPrefix(args[0], "-") {
		for i, a := range args {
			if _, ok := commands[a]; ok {
				return fmt.Sprintf("hold: flags go after the command: hold %s %s ...", a, strings.Join(args[:i], " "))
			}
			if _, err := strconv.ParseFloat(a, 64); a == "--" || !strings.HasPrefix(a, "-") && err != nil {
				// Past the flags and their values: the words that
				// follow are a target and a command, whatever their
				// names (hold -w 5 T -- ls).
				break
			}
		}
		if len(args) == 1 {
			return fmt.Sprintf("hold: unknown command %q: flags go after a command, as in hold run %s TARGET -- COMMAND; 'hold help' lists the commands", args[0], args[0])
		}
		// flock(1)'s order with its flags (hold -w 5 T -- CMD): hold
		// run takes the line as it is.
		return fmt.Sprintf("hold: unknown command %q: flags go after a command, as in %s; 'hold help' lists the commands", args[0], asRun(args))
	}
	if s := gnuflag.Suggest(args[0], visibleCommands()); s != "" {
		return fmt.Sprintf("hold: unknown command %q (did you mean 'hold %s'?); 'hold help' lists the commands", args[0], s)
	}
	if len(args) > 1 && (strings.ContainsAny(args[0], `/\.`) || isFile(args[0])) {
		// flock(1)'s own shape, flock FILE COMMAND: a path, then a
		// command.
		return fmt.Sprintf("hold: unknown command %q: to run a command under a lock, as flock FILE COMMAND does, say %s; 'hold help' lists the commands", args[0], asRun(args))
	}
	return fmt.Sprintf("hold: unknown command %q; 'hold help' lists the commands", args[0])
}

// asRun is the command line args as hold run's, quoted for a shell.
func asRun(args []string) string {
	words := []string{"hold", "run"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()#~*?[]{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// isFile reports whether name is an existing file, as a lock's path.
func isFile(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

// tagline says what hold is, in `hold help` and the man page's NAME.
const tagline = "run commands under cross-process locks (flock(1)-compatible), see who holds them"

// printUsage prints `hold help`, one screen: what hold is, how a command
// line goes, the commands, where each one's help is, and the exit
// statuses in brief (the man page, from exitCodeHelp, has them in full).
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "hold: "+tagline)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, "  hold COMMAND [flags] ARGS...")
	fmt.Fprintln(w, "  hold "+strings.Split(commands["run"].usage, "\n")[0])
	names := visibleCommands()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	for _, name := range names {
		fmt.Fprintf(w, "  %-*s %s\n", width, name, commands[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'hold help COMMAND' for a command's synopsis and all of its flags, 'hold COMMAND")
	fmt.Fprintln(w, "--help' for its first screen, and 'man hold' (or 'hold man') for the whole manual.")
	fmt.Fprintln(w)
	fmt.Fprint(w, briefExitStatuses())
}

// visibleCommands lists the names of the commands `hold help` shows,
// sorted: every one but the hidden ones.
func visibleCommands() []string {
	names := make([]string, 0, len(commands))
	for name, c := range commands {
		if !c.hidden {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
