package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hold-dev/hold/internal/gnuflag"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/nameddir"
)

// Shell completion works the same way in every shell: the script a shell
// loads asks hold itself what may come next (the hidden __complete
// command, given the words typed so far), and hold answers from its
// command registry and the subcommands' own flag sets. The scripts stay
// small and nothing can drift out of step with the commands.

func init() {
	register(&command{
		name:    "completion",
		summary: "print a shell completion script: bash, zsh or fish",
		usage:   "completion bash|zsh|fish",
		help: `
Load it in your shell's start-up file:
  bash:  source <(hold completion bash)          (~/.bashrc)
  zsh:   source <(hold completion zsh)           (~/.zshrc, after compinit)
  fish:  hold completion fish | source           (~/.config/fish/config.fish)
or install it where the shell looks for completions. It completes commands,
flags, protocol names, --name with the named locks that exist, and files.`,
		run: runCompletion,
	})
	register(&command{
		name:   completeCommand,
		usage:  completeCommand + " WORD...",
		hidden: true,
		run:    runComplete,
	})
}

// completeCommand is the hidden command the completion scripts call.
const completeCommand = "__complete"

// Directives, the first line of __complete's answer: whether the shell
// should offer file names when no candidate is given.
const (
	completeFiles   = "@files"
	completeNoFiles = "@nofiles"
)

// completionScripts are the scripts by shell. Each calls `hold __complete`
// with the words after "hold" up to the cursor, the last one the word being
// completed, and reads back a directive line, then one candidate per line,
// optionally followed by a tab and a description.
var completionScripts = map[string]string{
	"bash": `# bash completion for hold; load with: source <(hold completion bash)
_hold() {
	local cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\n' line
	local -a out
	out=($("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
	COMPREPLY=()
	for line in "${out[@]:1}"; do
		COMPREPLY+=("${line%%$'\t'*}")
	done
	if ((${#COMPREPLY[@]} == 0)) && [[ ${out[0]} == @files ]]; then
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _hold hold
`,
	"zsh": `#compdef hold
# zsh completion for hold; load with: source <(hold completion zsh)
# (after compinit), or save as _hold in a directory of $fpath.
_hold() {
	local -a lines cands
	local line
	lines=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	for line in "${(@)lines[2,-1]}"; do
		[[ -n $line ]] || continue
		if [[ $line == *$'\t'* ]]; then
			cands+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
		else
			cands+=("${line//:/\\:}")
		fi
	done
	if ((${#cands})); then
		_describe -t hold 'hold' cands
	elif [[ ${lines[1]} == @files ]]; then
		_files
	fi
}
if (($+functions[compdef])); then
	compdef _hold hold
fi
`,
	"fish": `# fish completion for hold; load with: hold completion fish | source
function __hold_complete
	set -l tokens (commandline -opc) (commandline -ct)
	set -l out ($tokens[1] __complete $tokens[2..-1] 2>/dev/null)
	if test (count $out) -gt 1
		printf '%s\n' $out[2..-1]
	else if test "$out[1]" = @files
		__fish_complete_path (commandline -ct)
	end
end
complete -c hold -f -a '(__hold_complete)'
`,
}

func completionShells() []string {
	shells := make([]string, 0, len(completionScripts))
	for s := range completionScripts {
		shells = append(shells, s)
	}
	slices.Sort(shells)
	return shells
}

func runCompletion(args []string) int {
	fs := newFlagSet("completion", true)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		return fail("completion", usagef("name one shell: %s", strings.Join(completionShells(), ", ")), exitConflict)
	}
	script, ok := completionScripts[fs.Arg(0)]
	if !ok {
		return fail("completion", usagef("no completion for %q (known: %s)", fs.Arg(0), strings.Join(completionShells(), ", ")), exitConflict)
	}
	fmt.Print(script)
	return 0
}

// candidate is one completion: a word and what it means.
type candidate struct{ word, about string }

// runComplete answers a completion script: args are the words after
// "hold", the last one being completed (possibly empty).
func runComplete(args []string) int {
	if len(args) == 0 {
		args = []string{""}
	}
	documentedDefaults()
	files, cands := complete(args[:len(args)-1], args[len(args)-1])
	if files {
		fmt.Println(completeFiles)
	} else {
		fmt.Println(completeNoFiles)
	}
	for _, c := range cands {
		if c.about != "" {
			fmt.Printf("%s\t%s\n", c.word, c.about)
		} else {
			fmt.Println(c.word)
		}
	}
	return 0
}

// complete returns what may replace cur after the words before it, and
// whether the shell should offer file names when nothing else fits.
func complete(before []string, cur string) (files bool, cands []candidate) {
	keep := func(all []candidate) []candidate {
		var out []candidate
		for _, c := range all {
			if strings.HasPrefix(c.word, cur) {
				out = append(out, c)
			}
		}
		return out
	}
	if len(before) == 0 {
		if strings.HasPrefix(cur, "-") {
			return false, keep([]candidate{{"--help", "list the commands"}, {"--version", "print hold's version"}})
		}
		return false, keep(commandCandidates())
	}
	c, ok := commands[before[0]]
	switch {
	case before[0] == "help":
		if len(before) == 1 {
			return false, keep(commandCandidates())
		}
		return false, nil
	case !ok || c.hidden:
		return true, nil
	case c.name == "completion":
		var shells []candidate
		for _, s := range completionShells() {
			shells = append(shells, candidate{s, ""})
		}
		return false, keep(shells)
	}
	fs := flagSetOf(c)
	words := before[1:]
	// bash splits "--flag=value" at the "=": complete the value.
	if n := len(words); n >= 2 && words[n-1] == "=" {
		if f := flagNamed(fs, words[n-2]); f != nil {
			return flagValues(f, cur)
		}
	}
	for i, w := range words {
		switch {
		case w == "--":
			return true, nil
		case strings.HasPrefix(w, "-") || takesValue(fs, words, i):
		case !interspersed(c):
			// Past TARGET, the words of `hold run` and `hold update`
			// belong to the command they run.
			return true, nil
		}
	}
	if n := len(words); n > 0 {
		if f := flagNamed(fs, words[n-1]); f != nil && f.NoOptDefVal == "" && !strings.Contains(words[n-1], "=") {
			return flagValues(f, cur)
		}
	}
	if name, value, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "--") {
		if f := flagNamed(fs, name); f != nil {
			files, vals := flagValues(f, value)
			for i := range vals {
				vals[i].word = name + "=" + vals[i].word
			}
			return files, vals
		}
	}
	if strings.HasPrefix(cur, "-") {
		var flags []candidate
		fs.VisitAll(func(f *gnuflag.Flag) {
			if f.Hidden {
				return
			}
			_, usage := gnuflag.UnquoteUsage(f)
			flags = append(flags, candidate{"--" + f.Name, usage})
			if f.Shorthand != "" {
				flags = append(flags, candidate{"-" + f.Shorthand, usage})
			}
		})
		return false, keep(flags)
	}
	return true, nil
}

// commandCandidates are the visible subcommands with their summaries.
func commandCandidates() []candidate {
	var cands []candidate
	for _, name := range visibleCommands() {
		cands = append(cands, candidate{name, commands[name].summary})
	}
	return cands
}

// interspersed reports whether c's flags may follow its positional
// arguments (false for run and update, whose flag sets stop at TARGET).
func interspersed(c *command) bool {
	return flagSetOf(c).Interspersed()
}

// takesValue reports whether words[i] is the value of the flag before it.
func takesValue(fs *gnuflag.FlagSet, words []string, i int) bool {
	if i == 0 {
		return false
	}
	f := flagNamed(fs, words[i-1])
	return f != nil && f.NoOptDefVal == "" && !strings.Contains(words[i-1], "=")
}

// flagNamed returns the flag a word like "--wait", "-w" or "-nw" sets
// last, or nil.
func flagNamed(fs *gnuflag.FlagSet, word string) *gnuflag.Flag {
	switch {
	case strings.HasPrefix(word, "--") && len(word) > 2:
		name, _, _ := strings.Cut(word[2:], "=")
		return fs.Lookup(name)
	case strings.HasPrefix(word, "-") && len(word) > 1:
		return fs.ShorthandLookup(word[len(word)-1:])
	}
	return nil
}

// flagValues completes the value of flag f.
func flagValues(f *gnuflag.Flag, cur string) (files bool, cands []candidate) {
	var all []candidate
	switch f.Name {
	case "protocol":
		for _, p := range lockspec.ProtocolNames() {
			summary, _ := lockspec.ProtocolSummary(p)
			all = append(all, candidate{p, summary})
		}
	case "name":
		for _, n := range namedLocks() {
			all = append(all, candidate{n, ""})
		}
	default:
		// Flags whose value is a file say so in their usage.
		arg, _ := gnuflag.UnquoteUsage(f)
		return arg == "FILE" || arg == "PATH", nil
	}
	for _, c := range all {
		if strings.HasPrefix(c.word, cur) {
			cands = append(cands, c)
		}
	}
	return false, cands
}

// namedLocks lists the named locks in the named-lock directory, without
// creating it.
func namedLocks() []string {
	dir, err := nameddir.Dir()
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if n, ok := lockpath.NameOf(e.Name(), hold.ValidName); ok {
			names = append(names, n)
		}
	}
	return names
}
