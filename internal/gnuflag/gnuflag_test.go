package gnuflag

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type parsed struct {
	n, x   bool
	wait   string
	code   int
	fields []string
	args   []string
	dash   int
}

func parse(t *testing.T, interspersed bool, args ...string) (parsed, error) {
	t.Helper()
	var p parsed
	fs := NewFlagSet("test")
	fs.SetInterspersed(interspersed)
	fs.BoolVarP(&p.n, "nonblock", "n", false, "fail at once")
	fs.BoolVarP(&p.x, "exclusive", "x", false, "exclusive")
	fs.StringVarP(&p.wait, "wait", "w", "", "wait `SECONDS`")
	fs.IntVarP(&p.code, "conflict-exit-code", "E", 1, "exit `N`")
	fs.StringArrayVar(&p.fields, "field", nil, "add `KEY=VALUE`")
	err := fs.Parse(args)
	p.args, p.dash = fs.Args(), fs.ArgsLenAtDash()
	return p, err
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name         string
		interspersed bool
		args         []string
		want         parsed
	}{
		{"long forms", true, []string{"--nonblock", "--wait=5", "--conflict-exit-code", "3", "T"},
			parsed{n: true, wait: "5", code: 3, args: []string{"T"}, dash: -1}},
		{"grouped shorthands with a value last", true, []string{"-nxw5", "T"},
			parsed{n: true, x: true, wait: "5", code: 1, args: []string{"T"}, dash: -1}},
		{"shorthand value in the next word", true, []string{"-w", "-1", "T"},
			parsed{wait: "-1", code: 1, args: []string{"T"}, dash: -1}},
		{"shorthand with =", true, []string{"-E=7"},
			parsed{code: 7, args: []string{}, dash: -1}},
		{"bool set false", true, []string{"--nonblock=false", "-n=false"},
			parsed{code: 1, args: []string{}, dash: -1}},
		{"repeatable keeps commas", true, []string{"--field", "a=1,2", "--field=b=3"},
			parsed{code: 1, fields: []string{"a=1,2", "b=3"}, args: []string{}, dash: -1}},
		{"interspersed flags after arguments", true, []string{"T", "-n", "U"},
			parsed{n: true, code: 1, args: []string{"T", "U"}, dash: -1}},
		{"not interspersed: the command's flags stay its own", false, []string{"-n", "T", "cmd", "-x"},
			parsed{n: true, code: 1, args: []string{"T", "cmd", "-x"}, dash: -1}},
		{"dash ends the flags", true, []string{"-n", "T", "--", "cmd", "-x"},
			parsed{n: true, code: 1, args: []string{"T", "cmd", "-x"}, dash: 1}},
		{"a lone dash is an argument", true, []string{"-", "-n"},
			parsed{n: true, code: 1, args: []string{"-"}, dash: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.interspersed, tc.args...)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if got.args == nil {
				got.args = []string{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.args, got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--frobnicate"}, "unknown flag: --frobnicate"},
		{[]string{"-nq"}, `unknown shorthand flag: "q" in -nq`},
		{[]string{"--wait"}, "flag needs an argument: --wait"},
		{[]string{"-nw"}, `flag needs an argument: "w" in -nw`},
		{[]string{"-E", "many"}, `invalid argument "many" for "-E, --conflict-exit-code" flag: want a whole number`},
		{[]string{"--nonblock=perhaps"}, `invalid argument "perhaps" for "-n, --nonblock" flag`},
		{[]string{"---x"}, "bad flag syntax: ---x"},
	} {
		_, err := parse(t, true, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		if _, err := parse(t, true, args...); !errors.Is(err, ErrHelp) {
			t.Errorf("Parse(%q) = %v, want ErrHelp", args, err)
		}
	}
}

func TestChangedAndSet(t *testing.T) {
	fs := NewFlagSet("test")
	w := fs.String("wait", "", "")
	fs.Bool("verbose", false, "")
	if err := fs.Parse([]string{"--verbose"}); err != nil {
		t.Fatal(err)
	}
	if !fs.Changed("verbose") || fs.Changed("wait") || fs.Changed("nothing") {
		t.Errorf("Changed: verbose %v wait %v", fs.Changed("verbose"), fs.Changed("wait"))
	}
	if err := fs.Set("wait", "2"); err != nil || *w != "2" || !fs.Changed("wait") {
		t.Errorf("Set: err %v, value %q, changed %v", err, *w, fs.Changed("wait"))
	}
	if err := fs.Set("nothing", "1"); err == nil {
		t.Error("Set of an undefined flag succeeded")
	}
}

func TestUsages(t *testing.T) {
	fs := NewFlagSet("test")
	fs.BoolP("nonblock", "n", false, "fail at once")
	fs.String("protocol", "flock", "lock protocol `NAME`")
	fs.Bool("nb", false, "same as --nonblock")
	_ = fs.MarkHidden("nb")
	got := fs.Usages(100)
	want := "" +
		"  -n, --nonblock        fail at once\n" +
		"      --protocol NAME   lock protocol NAME (default \"flock\")\n"
	if got != want {
		t.Errorf("Usages:\n%s\nwant:\n%s", got, want)
	}
	long := NewFlagSet("test")
	long.Bool("verbose", false, strings.Repeat("word ", 30))
	for _, line := range strings.Split(strings.TrimSuffix(long.Usages(60), "\n"), "\n") {
		if len(line) > 60 {
			t.Errorf("line of %d characters, want at most 60: %q", len(line), line)
		}
	}
}

func TestUnquoteUsage(t *testing.T) {
	fs := NewFlagSet("test")
	fs.StringP("lock-file", "", "", "use the lock file `PATH` instead")
	fs.IntP("count", "c", 0, "how many")
	fs.Bool("v", false, "verbose")
	for name, want := range map[string][2]string{
		"lock-file": {"PATH", "use the lock file PATH instead"},
		"count":     {"int", "how many"},
		"v":         {"", "verbose"},
	} {
		arg, usage := UnquoteUsage(fs.Lookup(name))
		if arg != want[0] || usage != want[1] {
			t.Errorf("UnquoteUsage(%s) = %q, %q; want %q, %q", name, arg, usage, want[0], want[1])
		}
	}
}

func TestAddFlagShares(t *testing.T) {
	a := NewFlagSet("a")
	v := a.StringP("wait", "w", "", "")
	a.Bool("shared", false, "")
	b := NewFlagSet("a")
	a.VisitAll(func(f *Flag) {
		if f.Name != "shared" {
			b.AddFlag(f)
		}
	})
	if err := b.Parse([]string{"-w", "3"}); err != nil || *v != "3" || !a.Changed("wait") {
		t.Errorf("parse of the subset: err %v, value %q, changed in the original %v", err, *v, a.Changed("wait"))
	}
	if err := b.Parse([]string{"--shared"}); err == nil {
		t.Error("a flag left out of the subset was accepted")
	}
}

// TestSuggest: a near miss of a name is named, a word far from every
// name is not, and an unknown flag's error names its closest flag.
func TestSuggest(t *testing.T) {
	names := []string{"run", "status", "update", "append", "ls"}
	for word, want := range map[string]string{
		"rnu": "run", "stauts": "status", "udpate": "update", "apend": "append",
		"sl": "ls", "frobnicate": "", "x": "", "run": "",
	} {
		if got := Suggest(word, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
	fs := NewFlagSet("t")
	fs.Bool("nonblock", false, "")
	fs.Bool("secret", false, "")
	fs.MarkHidden("secret")
	if err := fs.Parse([]string{"--nonblok"}); err == nil || !strings.Contains(err.Error(), "did you mean --nonblock?") {
		t.Errorf("--nonblok: %v", err)
	}
	if err := fs.Parse([]string{"--secrte"}); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("--secrte suggests a hidden flag: %v", err)
	}
}

// TestRefuse: a refused name is an error that gives the reason, in every
// spelling; the refused names are no flags of the set.
func TestRefuse(t *testing.T) {
	fs := NewFlagSet("hold update")
	var n bool
	fs.BoolVarP(&n, "nonblock", "n", false, "")
	fs.Refuse("shared", "s", "not alone")
	fs.Refuse("slots", "", "N holders")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-s"}, "-s does not apply: not alone"},
		{[]string{"-ns"}, "-s (in -ns) does not apply: not alone"},
		{[]string{"--shared"}, "--shared does not apply: not alone"},
		{[]string{"--slots", "4"}, "--slots does not apply: N holders"},
		{[]string{"--slots=4"}, "--slots does not apply: N holders"},
	} {
		if err := fs.Parse(tc.args); err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
	if fs.Lookup("shared") != nil || fs.ShorthandLookup("s") != nil {
		t.Error("a refused flag is a flag of the set")
	}
}

// TestShorthandAliases: an alias is listed, the shorthand itself is not.
func TestShorthandAliases(t *testing.T) {
	fs := NewFlagSet("hold run")
	var x bool
	fs.BoolVarP(&x, "exclusive", "x", false, "")
	fs.AliasShorthand("e", "exclusive")
	if got := fs.ShorthandAliases("exclusive"); !reflect.DeepEqual(got, []string{"e"}) {
		t.Errorf("ShorthandAliases = %q, want [e]", got)
	}
}
