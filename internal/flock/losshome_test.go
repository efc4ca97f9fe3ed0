package flock

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Loss detection has one home: each protocol watches its own locks and
// closes Lost (this package for kernel locks, see watch.go), and the
// front ends act on Lost. These tests fail when a front end grows a copy:
// a poll of Check on a timer, or a test of which protocol (or whether the
// lock has a file) to decide whether to look.

// frontEnds are the directories of the code on top of the protocols:
// the root package (its own directory only), the CLI, the agent, the lock
// specs, the etcd and PostgreSQL CLIs and the commands. One that does not
// exist is passed over (the etcd CLI's moves to internal/etcdcli).
var frontEnds = []struct {
	dir     string
	recurse bool
}{
	{"../..", false},
	{"../cli", true},
	{"../agent", true},
	{"../lockspec", true},
	{"../etcdcli", true},
	{"../pgcli", true},
	{"../../cmd", true},
}

// TestLossDetectedByProtocolsOnly: no front-end function looks at a lock
// (a call of Check) and also wakes itself periodically (a ticker, a sleep)
// or tells kernel locks apart (Protocol() == "flock", File() != nil).
func TestLossDetectedByProtocolsOnly(t *testing.T) {
	fset := token.NewFileSet()
	files, looks := 0, 0
	for _, fe := range frontEnds {
		err := filepath.WalkDir(fe.dir, func(path string, d fs.DirEntry, err error) error {
			if path == fe.dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != fe.dir && (!fe.recurse || d.Name() == "testdata" || d.Name() == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, v := range lossCopies(fset, f, &looks) {
				t.Errorf("%s: %s", v, "loss is the protocols' to detect (internal/flock/watch.go for kernel locks): act on Lost or AfterLost instead")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The front ends do look (hold check, the agent's check): a test that
	// found none would be reading the wrong files.
	if files < 20 || looks == 0 {
		t.Fatalf("read %d front-end files with %d calls of Check: not the front ends", files, looks)
	}
}

// TestLossCopiesFound: the checker finds the copies the front ends had
// before the library watched kernel locks itself.
func TestLossCopiesFound(t *testing.T) {
	for name, src := range map[string]string{
		"ticker": `package p
func (r *runner) loop() {
	tick := time.NewTicker(time.Second)
	for range tick.C {
		if err := r.l.Check(); err != nil { return }
	}
}`,
		"sleep": `package p
func watch(l *hold.Lock) {
	for l.Check() == nil { time.Sleep(time.Second) }
}`,
		"protocol": `package p
func patrol(a *agent) {
	for _, al := range a.locks {
		if al.l.Protocol() == "flock" { al.l.Check() }
	}
}`,
		"file": `package p
func start(l *hold.Lock) {
	if l.File() != nil { go func() { l.Check() }() }
}`,
		"lost by protocol": `package p
func watchLoss(l *hold.Lock) {
	if "flock" != l.Protocol() { <-l.Lost() }
}`,
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name+".go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		var looks int
		if v := lossCopies(fset, f, &looks); len(v) != 1 {
			t.Errorf("%s: found %q, want one copy", name, v)
		}
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fine.go", `package p
func onLost(l *hold.Lock) {
	<-l.Lost()
	why := l.Check()
	t := time.After(time.Second)
	_, _ = why, t
}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	var looks int
	if v := lossCopies(fset, f, &looks); len(v) != 0 || looks != 1 {
		t.Errorf("acting on Lost and asking why: found %q, %d looks", v, looks)
	}
}

// lossCopies returns, for each function of f that detects loss itself,
// where and how; looks counts the calls of Check it saw.
func lossCopies(fset *token.FileSet, f *ast.File, looks *int) []string {
	var found []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		var checks, watches int
		var wakes, kernel []string
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					break
				}
				switch name := sel.Sel.Name; {
				case name == "Check" && len(n.Args) == 0:
					checks++
				case name == "Lost" && len(n.Args) == 0, name == "AfterLost":
					watches++
				case isIdent(sel.X, "time") && (name == "NewTicker" || name == "Tick" || name == "Sleep"):
					wakes = append(wakes, "time."+name)
				}
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					break
				}
				for _, pair := range [][2]ast.Expr{{n.X, n.Y}, {n.Y, n.X}} {
					switch {
					case isCallOf(pair[0], "Protocol") && isString(pair[1], `"flock"`):
						kernel = append(kernel, `Protocol() `+n.Op.String()+` "flock"`)
					case isCallOf(pair[0], "File") && isIdent(pair[1], "nil"):
						kernel = append(kernel, `File() `+n.Op.String()+` nil`)
					}
				}
			}
			return true
		})
		*looks += checks
		where := fset.Position(fn.Pos()).String() + " " + fn.Name.Name
		switch {
		case checks > 0 && len(wakes) > 0:
			found = append(found, where+" calls Check and "+wakes[0])
		case checks+watches > 0 && len(kernel) > 0:
			found = append(found, where+" watches a lock and tests "+kernel[0])
		}
	}
	return found
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isString(e ast.Expr, lit string) bool {
	b, ok := e.(*ast.BasicLit)
	return ok && b.Kind == token.STRING && b.Value == lit
}

// isCallOf reports whether e is a call of a method name without
// arguments.
func isCallOf(e ast.Expr, name string) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 0 {
		return false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}
