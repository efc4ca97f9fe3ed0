// Package gnuflag parses command lines in the GNU style that flock(1) and
// most Unix tools accept: long flags (--wait=5, --wait 5), one-letter
// shorthands that may be grouped (-nw5, -n -w 5), "--" to end the flags,
// and optionally flags after the first positional argument.
//
// hold used github.com/spf13/pflag for this. pflag imports package net
// (for its IP-address flags), and net turns on cgo on Linux, so every hold
// binary built by a plain `go build` was dynamically linked and paid the
// dynamic loader's start-up on every lock. The standard flag package has
// no shorthands or grouping, which flock(1)'s users type. This package
// keeps the part of pflag's API hold uses, on the standard library alone.
package gnuflag

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrHelp is returned by Parse for -h or --help when the flag set defines
// no flag of that name.
var ErrHelp = errors.New("help requested")

// A Value is the value a flag sets. Type names it in usage text when the
// usage does not name it between backquotes.
type Value interface {
	String() string
	Set(string) error
	Type() string
}

// A Flag is one defined flag.
type Flag struct {
	Name      string // long name, used as --Name
	Shorthand string // one letter, used as -Shorthand; may be empty
	Usage     string // help text; a `word` in backquotes names the value
	Value     Value
	DefValue  string // the value's text before parsing
	Changed   bool   // whether the command line set it
	// NoOptDefVal is the value given to a flag named without one: "true"
	// for boolean flags. A flag whose NoOptDefVal is empty takes the next
	// argument as its value.
	NoOptDefVal string
	Hidden      bool // left out of usage text and completion
}

// A FlagSet is a set of defined flags and the arguments left after
// parsing.
type FlagSet struct {
	name         string
	interspersed bool
	flags        []*Flag // in definition order, which usage text keeps
	byName       map[string]*Flag
	byShort      map[string]*Flag
	args         []string
	argsAtDash   int
	// refused are names that are no flag of this set but that a user
	// may well give it (a lock flag a command cannot honour), each with
	// why it is refused: see Refuse.
	refused map[string]string
}

// NewFlagSet returns an empty flag set named name (used in errors). Flags
// may follow positional arguments unless SetInterspersed(false) is called.
func NewFlagSet(name string) *FlagSet {
	return &FlagSet{
		name:         name,
		interspersed: true,
		byName:       map[string]*Flag{},
		byShort:      map[string]*Flag{},
		argsAtDash:   -1,
	}
}

// Name returns the flag set's name.
func (fs *FlagSet) Name() string { return fs.name }

// SetInterspersed sets whether flags may follow positional arguments.
// With false, parsing stops at the first positional argument, so that
// `hold run -n T -- cmd -x` leaves "-x" to cmd.
func (fs *FlagSet) SetInterspersed(on bool) { fs.interspersed = on }

// Interspersed reports whether flags may follow positional arguments.
func (fs *FlagSet) Interspersed() bool { return fs.interspersed }

// VarP defines a flag with a long name, a shorthand (or "") and a value.
// It panics if either name is already defined, as the standard library's
// flag package does: that is a programming error.
func (fs *FlagSet) VarP(v Value, name, shorthand, usage string) *Flag {
	if _, dup := fs.byName[name]; dup || name == "" {
		panic(fmt.Sprintf("%s: flag --%s defined twice or empty", fs.name, name))
	}
	if len(shorthand) > 1 {
		panic(fmt.Sprintf("%s: shorthand %q of --%s is more than one letter", fs.name, shorthand, name))
	}
	f := &Flag{Name: name, Shorthand: shorthand, Usage: usage, Value: v, DefValue: v.String()}
	if shorthand != "" {
		if _, dup := fs.byShort[shorthand]; dup {
			panic(fmt.Sprintf("%s: shorthand -%s defined twice", fs.name, shorthand))
		}
		fs.byShort[shorthand] = f
	}
	fs.byName[name] = f
	fs.flags = append(fs.flags, f)
	return f
}

// AddFlag adds f, a flag of another set, to this one: the two sets then
// share it, its value and Changed included. It panics on a name already
// defined, as VarP does.
func (fs *FlagSet) AddFlag(f *Flag) {
	if _, dup := fs.byName[f.Name]; dup {
		panic(fmt.Sprintf("%s: flag --%s defined twice", fs.name, f.Name))
	}
	if f.Shorthand != "" {
		if _, dup := fs.byShort[f.Shorthand]; dup {
			panic(fmt.Sprintf("%s: shorthand -%s defined twice", fs.name, f.Shorthand))
		}
		fs.byShort[f.Shorthand] = f
	}
	fs.byName[f.Name] = f
	fs.flags = append(fs.flags, f)
}

// AliasShorthand makes -shorthand a second shorthand of the flag name
// (flock(1)'s -e for -x). Usage text shows only the first; say the alias
// in the flag's usage.
func (fs *FlagSet) AliasShorthand(shorthand, name string) {
	f := fs.byName[name]
	if f == nil || len(shorthand) != 1 {
		panic(fmt.Sprintf("%s: alias -%s of unknown flag --%s", fs.name, shorthand, name))
	}
	if _, dup := fs.byShort[shorthand]; dup {
		panic(fmt.Sprintf("%s: shorthand -%s defined twice", fs.name, shorthand))
	}
	fs.byShort[shorthand] = f
}

// Var defines a flag with no shorthand.
func (fs *FlagSet) Var(v Value, name, usage string) { fs.VarP(v, name, "", usage) }

// BoolVarP defines a boolean flag stored in p.
func (fs *FlagSet) BoolVarP(p *bool, name, shorthand string, value bool, usage string) {
	*p = value
	fs.VarP((*boolValue)(p), name, shorthand, usage).NoOptDefVal = "true"
}

// BoolVar defines a boolean flag with no shorthand, stored in p.
func (fs *FlagSet) BoolVar(p *bool, name string, value bool, usage string) {
	fs.BoolVarP(p, name, "", value, usage)
}

// BoolP defines a boolean flag and returns where it is stored.
func (fs *FlagSet) BoolP(name, shorthand string, value bool, usage string) *bool {
	p := new(bool)
	fs.BoolVarP(p, name, shorthand, value, usage)
	return p
}

// Bool defines a boolean flag with no shorthand.
func (fs *FlagSet) Bool(name string, value bool, usage string) *bool {
	return fs.BoolP(name, "", value, usage)
}

// StringVarP defines a string flag stored in p.
func (fs *FlagSet) StringVarP(p *string, name, shorthand, value, usage string) {
	*p = value
	fs.VarP((*stringValue)(p), name, shorthand, usage)
}

// StringVar defines a string flag with no shorthand, stored in p.
func (fs *FlagSet) StringVar(p *string, name, value, usage string) {
	fs.StringVarP(p, name, "", value, usage)
}

// StringP defines a string flag and returns where it is stored.
func (fs *FlagSet) StringP(name, shorthand, value, usage string) *string {
	p := new(string)
	fs.StringVarP(p, name, shorthand, value, usage)
	return p
}

// String defines a string flag with no shorthand.
func (fs *FlagSet) String(name, value, usage string) *string {
	return fs.StringP(name, "", value, usage)
}

// IntVarP defines an integer flag stored in p.
func (fs *FlagSet) IntVarP(p *int, name, shorthand string, value int, usage string) {
	*p = value
	fs.VarP((*intValue)(p), name, shorthand, usage)
}

// IntP defines an integer flag and returns where it is stored.
func (fs *FlagSet) IntP(name, shorthand string, value int, usage string) *int {
	p := new(int)
	fs.IntVarP(p, name, shorthand, value, usage)
	return p
}

// StringArrayVar defines a repeatable flag: each use appends its value,
// commas and all, to *p.
func (fs *FlagSet) StringArrayVar(p *[]string, name string, value []string, usage string) {
	*p = append([]string(nil), value...)
	fs.VarP(&arrayValue{p: p}, name, "", usage)
}

// MarkHidden leaves the flag name out of usage text and completion; it
// still parses.
func (fs *FlagSet) MarkHidden(name string) error {
	f := fs.byName[name]
	if f == nil {
		return fmt.Errorf("no flag --%s", name)
	}
	f.Hidden = true
	return nil
}

// Refuse makes --name, and -shorthand unless it is "", an error whose
// message is why, instead of the "unknown flag" of a name the set does not
// know. It is for a flag that other commands sharing these flags accept
// but that this one cannot honour: the user who types it is told what
// it would have broken and what to do, rather than that it does not
// exist. The name must not be a flag of the set.
func (fs *FlagSet) Refuse(name, shorthand, why string) {
	if fs.byName[name] != nil || shorthand != "" && fs.byShort[shorthand] != nil {
		panic(fmt.Sprintf("%s: refused flag --%s is defined", fs.name, name))
	}
	if fs.refused == nil {
		fs.refused = map[string]string{}
	}
	fs.refused["--"+name] = why
	if shorthand != "" {
		fs.refused["-"+shorthand] = why
	}
}

// ShorthandAliases returns the shorthands of the flag name that
// AliasShorthand added, which usage text does not show.
func (fs *FlagSet) ShorthandAliases(name string) []string {
	f := fs.byName[name]
	var aliases []string
	for short, g := range fs.byShort {
		if g == f && short != f.Shorthand {
			aliases = append(aliases, short)
		}
	}
	slices.Sort(aliases)
	return aliases
}

// Lookup returns the flag with the long name, or nil.
func (fs *FlagSet) Lookup(name string) *Flag { return fs.byName[name] }

// ShorthandLookup returns the flag with the shorthand, or nil.
func (fs *FlagSet) ShorthandLookup(shorthand string) *Flag { return fs.byShort[shorthand] }

// Changed reports whether the command line (or Set) set the flag name.
func (fs *FlagSet) Changed(name string) bool {
	f := fs.byName[name]
	return f != nil && f.Changed
}

// Set sets the flag name to value as the command line would.
func (fs *FlagSet) Set(name, value string) error {
	f := fs.byName[name]
	if f == nil {
		return fmt.Errorf("no such flag --%s", name)
	}
	if err := f.Value.Set(value); err != nil {
		return err
	}
	f.Changed = true
	return nil
}

// VisitAll calls fn for every flag, in the order they were defined.
func (fs *FlagSet) VisitAll(fn func(*Flag)) {
	for _, f := range fs.flags {
		fn(f)
	}
}

// Args returns the arguments that are not flags.
func (fs *FlagSet) Args() []string { return fs.args }

// NArg returns len(Args()).
func (fs *FlagSet) NArg() int { return len(fs.args) }

// Arg returns Args()[i], or "" when there is none.
func (fs *FlagSet) Arg(i int) string {
	if i < 0 || i >= len(fs.args) {
		return ""
	}
	return fs.args[i]
}

// ArgsLenAtDash returns how many of Args() came before a "--", or -1 when
// the command line had none.
func (fs *FlagSet) ArgsLenAtDash() int { return fs.argsAtDash }

// Parse parses args, which must not include the command name. Parsing
// stops at "--" and, unless interspersed, at the first positional
// argument; "-" alone is a positional argument.
func (fs *FlagSet) Parse(args []string) error {
	fs.args = fs.args[:0]
	fs.argsAtDash = -1
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		switch {
		case a == "--":
			fs.argsAtDash = len(fs.args)
			fs.args = append(fs.args, args...)
			return nil
		case len(a) < 2 || a[0] != '-':
			if !fs.interspersed {
				fs.args = append(fs.args, a)
				fs.args = append(fs.args, args...)
				return nil
			}
			fs.args = append(fs.args, a)
		case a[1] == '-':
			var err error
			if args, err = fs.parseLong(a, args); err != nil {
				return err
			}
		default:
			var err error
			if args, err = fs.parseShort(a, args); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseLong parses "--name", "--name=value" or "--name value".
func (fs *FlagSet) parseLong(a string, rest []string) ([]string, error) {
	name, value, hasValue := strings.Cut(a[2:], "=")
	if name == "" || name[0] == '-' || name[0] == '=' {
		return rest, fmt.Errorf("bad flag syntax: %s", a)
	}
	f := fs.byName[name]
	switch {
	case f == nil && (name == "help"):
		return rest, ErrHelp
	case f == nil && fs.refused["--"+name] != "":
		return rest, fmt.Errorf("--%s does not apply: %s", name, fs.refused["--"+name])
	case f == nil:
		return rest, fmt.Errorf("unknown flag: --%s%s", name, fs.suggestFlag(name))
	case hasValue:
	case f.NoOptDefVal != "":
		value = f.NoOptDefVal
	case len(rest) > 0:
		value, rest = rest[0], rest[1:]
	default:
		return rest, fmt.Errorf("flag needs an argument: --%s", name)
	}
	return rest, fs.set(f, value)
}

// parseShort parses a group of shorthands: "-n", "-nx", "-w5", "-w 5",
// "-w=5". A shorthand that takes a value ends the group.
func (fs *FlagSet) parseShort(a string, rest []string) ([]string, error) {
	group := a[1:]
	for len(group) > 0 {
		c := group[:1]
		group = group[1:]
		f := fs.byShort[c]
		if f == nil {
			if c == "h" {
				return rest, ErrHelp
			}
			if why := fs.refused["-"+c]; why != "" {
				in := ""
				if len(a) > 2 {
					in = " (in " + a + ")"
				}
				return rest, fmt.Errorf("-%s%s does not apply: %s", c, in, why)
			}
			return rest, fmt.Errorf("unknown shorthand flag: %q in %s", c, a)
		}
		var value string
		switch {
		case strings.HasPrefix(group, "="):
			value, group = group[1:], ""
		case f.NoOptDefVal != "":
			value = f.NoOptDefVal
		case group != "":
			value, group = group, ""
		case len(rest) > 0:
			value, rest = rest[0], rest[1:]
		default:
			return rest, fmt.Errorf("flag needs an argument: %q in %s", c, a)
		}
		if err := fs.set(f, value); err != nil {
			return rest, err
		}
	}
	return rest, nil
}

func (fs *FlagSet) set(f *Flag, value string) error {
	if err := f.Value.Set(value); err != nil {
		return fmt.Errorf("invalid argument %q for %q flag: %v", value, flagNames(f), err)
	}
	f.Changed = true
	return nil
}

// flagNames is how errors name a flag: "-w, --wait" or "--verbose".
func flagNames(f *Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + ", --" + f.Name
	}
	return "--" + f.Name
}

// UnquoteUsage returns the name of f's value, taken from the first
// `backquoted` word of its usage (else from the value's type; "" for a
// boolean), and the usage without the backquotes.
func UnquoteUsage(f *Flag) (name, usage string) {
	usage = f.Usage
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			name = usage[i+1 : i+1+j]
			return name, usage[:i] + name + usage[i+1+j+1:]
		}
	}
	if f.Value == nil {
		return "", usage
	}
	switch t := f.Value.Type(); t {
	case "bool":
		return "", usage
	default:
		return t, usage
	}
}

// Usages returns the usage text of the visible flags, one or more lines
// each, the usages aligned in a column and wrapped to width characters.
func (fs *FlagSet) Usages(width int) string {
	type row struct{ head, usage string }
	var rows []row
	col := 0
	for _, f := range fs.flags {
		if f.Hidden {
			continue
		}
		arg, usage := UnquoteUsage(f)
		head := "      --" + f.Name
		if f.Shorthand != "" {
			head = "  -" + f.Shorthand + ", --" + f.Name
		}
		if arg != "" {
			head += " " + arg
		}
		if d := defaultText(f); d != "" {
			usage += " (default " + d + ")"
		}
		rows = append(rows, row{head, usage})
		col = max(col, len(head))
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.head)
		b.WriteString(strings.Repeat(" ", col-len(r.head)+3))
		b.WriteString(wrap(r.usage, col+3, width))
		b.WriteByte('\n')
	}
	return b.String()
}

// defaultText is the default shown in usage text: none for a zero value.
func defaultText(f *Flag) string {
	switch d := f.DefValue; d {
	case "", "false", "0", "[]":
		return ""
	default:
		if _, ok := f.Value.(*stringValue); ok {
			return strconv.Quote(d)
		}
		return d
	}
}

// wrap breaks s at spaces so that lines indented by indent stay within
// width; a width too small for that leaves s whole.
func wrap(s string, indent, width int) string {
	room := width - indent
	if room < 24 {
		return s
	}
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if line+1+len(w) > room {
				b.WriteString("\n" + strings.Repeat(" ", indent))
				line = 0
			} else {
				b.WriteByte(' ')
				line++
			}
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

type boolValue bool

func (b *boolValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*b = boolValue(v)
	return nil
}
func (b *boolValue) String() string { return strconv.FormatBool(bool(*b)) }
func (b *boolValue) Type() string   { return "bool" }

type stringValue string

func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }
func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Type() string       { return "string" }

type intValue int

func (n *intValue) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("want a whole number")
	}
	*n = intValue(v)
	return nil
}
func (n *intValue) String() string { return strconv.Itoa(int(*n)) }
func (n *intValue) Type() string   { return "int" }

// arrayValue collects every use of a repeatable flag. The first use
// replaces the default, as a user who names the flag expects.
type arrayValue struct {
	p   *[]string
	set bool
}

func (a *arrayValue) Set(s string) error {
	if !a.set {
		*a.p = nil
		a.set = true
	}
	*a.p = append(*a.p, s)
	return nil
}
func (a *arrayValue) String() string {
	if len(*a.p) == 0 {
		return "[]"
	}
	return "[" + strings.Join(*a.p, ",") + "]"
}
func (a *arrayValue) Type() string { return "stringArray" }

// Suggest returns the candidate that word most likely misspells, or "" if
// none is close: at most one edit (a letter added, dropped, changed, or
// two neighbours swapped) for a word of up to four letters, two for a
// longer one. A tie goes to the earlier candidate.
func Suggest(word string, candidates []string) string {
	limit := 1
	if len(word) > 4 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if c == word {
			continue
		}
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of adjacent letters.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// suggestFlag is " (did you mean --NAME?)" for the visible flag that name
// most likely misspells, or "".
func (fs *FlagSet) suggestFlag(name string) string {
	var names []string
	for _, f := range fs.flags {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	if s := Suggest(name, names); s != "" {
		return " (did you mean --" + s + "?)"
	}
	return ""
}
