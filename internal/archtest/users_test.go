package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// implicitMethods are methods called through an interface of the standard
// library (fmt, errors), which no selector in a user's file names.
var implicitMethods = []string{"String", "Error", "Unwrap", "Is", "As", "Format", "GoString"}

// TestRootNamesServeUsers checks that every name go doc shows for the root
// package is there for a program that takes locks: that code outside the
// module's internal/ tree (the commands, doctor, holdtest, the protocols,
// bench, examples/) uses it, or that one of the root's examples shows it.
// A name whose only callers are hold's own front ends (internal/cli,
// internal/agent, internal/lockspec) belongs in an internal package that
// they and the root share, not in the API every user is promised; the
// root's other tests do not count either, since a test can justify any
// name. Methods count as used when any selector of theirs appears in such
// a file (the check reads syntax, not types), or when they are called
// through an interface of the standard library (String, Error, ...).
func TestRootNamesServeUsers(t *testing.T) {
	root := moduleRoot()
	exported := rootExports(t, root)
	if len(exported) < 20 || !slices.Contains(exported, "Acquire") || !slices.Contains(exported, "Lock.Release") {
		t.Fatalf("found too few exported root names to judge: %v", exported)
	}
	used := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel == "internal" || base == "testdata" || base == "node_modules" || rel != "." && strings.HasPrefix(base, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		inRoot := !strings.Contains(rel, "/")
		if inRoot && !strings.HasSuffix(rel, "_test.go") {
			return nil // the root itself
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if inRoot {
			for _, decl := range f.Decls {
				if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example") {
					noteExample(used, fd.Name.Name)
					noteUses(used, f, fd)
				}
			}
			return nil
		}
		noteUses(used, f, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range exported {
		if used[name] {
			continue
		}
		if typ, m, ok := strings.Cut(name, "."); ok && (used["."+m] && used[typ] || slices.Contains(implicitMethods, m) && used[typ]) {
			continue
		}
		t.Errorf("hold.%s: nothing outside internal/ uses it and no example shows it: move it to an internal package that the root and the front ends share", name)
	}
}

// rootExports returns the exported names of the root package's non-test
// files: top-level functions, types, variables and constants by name,
// methods of exported types as Type.Method.
func rootExports(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					out = append(out, d.Name.Name)
				} else if recv := embeddedName(d.Recv.List[0].Type); ast.IsExported(recv) {
					out = append(out, recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out = append(out, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() {
								out = append(out, id.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// noteUses marks in used what node, part of file f, names of the root:
// pkg.Name for the root's import name pkg, and .Name for every selector
// (the candidates for methods). A file that does not import the root
// uses nothing of it.
func noteUses(used map[string]bool, f *ast.File, node ast.Node) {
	rootName := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == module {
			rootName = "hold"
			if im.Name != nil {
				rootName = im.Name.Name
			}
		}
	}
	if rootName == "" || rootName == "_" {
		return
	}
	ast.Inspect(node, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == rootName {
			used[sel.Sel.Name] = true
		} else {
			used["."+sel.Sel.Name] = true
		}
		return true
	})
}

// noteExample marks the name an example function documents, by go doc's
// naming: ExampleF, ExampleT, ExampleT_M, each with an optional _suffix.
func noteExample(used map[string]bool, fn string) {
	name := strings.TrimPrefix(fn, "Example")
	if name == "" {
		return
	}
	typ, rest, _ := strings.Cut(name, "_")
	used[typ] = true
	if m, _, _ := strings.Cut(rest, "_"); m != "" && ast.IsExported(m) {
		used[typ+"."+m] = true
	}
}
