package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// publicPackages are the module's packages a user imports, relative to the
// module root ("" for hold itself).
var publicPackages = []string{"", "lock", "holdtest", "portable", "etcd", "postgres", "doctor"}

// TestGoDocShowsFields checks that go doc of every public package shows
// what its exported types hold: no exported type is an alias of another
// package's type (go doc prints only "type X = y.Z") except of lock's,
// whose doc comment then names the lock type; no exported type is defined
// on an internal package's type; no exported signature or field mentions
// an internal package's type, which a user can neither read nor name; and
// a struct with no exported field says in its doc comment that it is
// opaque.
func TestGoDocShowsFields(t *testing.T) {
	for _, dir := range publicPackages {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(moduleRoot(), dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", name(dir), err)
		}
		for _, fn := range files {
			if strings.HasSuffix(fn, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, fn, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, fset, f)
		}
	}
}

// checkFile applies TestGoDocShowsFields' rules to one file.
func checkFile(t *testing.T, fset *token.FileSet, f *ast.File) {
	t.Helper()
	imports := map[string]string{} // name in the file -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		n := path.Base(p)
		if im.Name != nil {
			n = im.Name.Name
		}
		imports[n] = p
	}
	where := func(n ast.Node) string {
		pos := fset.Position(n.Pos())
		if r, err := filepath.Rel(moduleRoot(), pos.Filename); err == nil {
			pos.Filename = filepath.ToSlash(r)
		}
		return pos.String()
	}
	// internalRef returns the first internal package's name that expr
	// mentions (as pkg.Name), or "".
	internalRef := func(expr ast.Node) string {
		found := ""
		ast.Inspect(expr, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && found == "" {
				if id, ok := sel.X.(*ast.Ident); ok && strings.Contains(imports[id.Name], "/internal/") {
					found = id.Name + "." + sel.Sel.Name
				}
			}
			return found == ""
		})
		return found
	}
	exportedFields := func(fl *ast.FieldList) []*ast.Field {
		var out []*ast.Field
		if fl == nil {
			return nil
		}
		for _, fd := range fl.List {
			if len(fd.Names) == 0 { // embedded: exported if its type is
				if ast.IsExported(embeddedName(fd.Type)) {
					out = append(out, fd)
				}
				continue
			}
			for _, n := range fd.Names {
				if n.IsExported() {
					out = append(out, fd)
					break
				}
			}
		}
		return out
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Recv != nil && !ast.IsExported(embeddedName(d.Recv.List[0].Type)) {
				continue
			}
			if ref := internalRef(d.Type); ref != "" {
				t.Errorf("%s: func %s mentions %s, an internal package's type", where(d), d.Name.Name, ref)
			}
		case *ast.GenDecl:
			if d.Tok != token.TYPE {
				continue
			}
			for _, spec := range d.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() {
					continue
				}
				doc := d.Doc.Text() + ts.Doc.Text()
				if ts.Assign != 0 {
					sel, ok := ts.Type.(*ast.SelectorExpr)
					id, _ := func() (*ast.Ident, bool) {
						if !ok {
							return nil, false
						}
						i, ok := sel.X.(*ast.Ident)
						return i, ok
					}()
					switch {
					case id == nil || imports[id.Name] != module+"/lock":
						t.Errorf("%s: type %s is an alias, which go doc shows without fields; define it (aliases are for lock's types only)", where(ts), ts.Name.Name)
					case !strings.Contains(doc, "lock."+sel.Sel.Name):
						t.Errorf("%s: type %s = lock.%s: its doc comment must name lock.%s, where go doc shows its fields", where(ts), ts.Name.Name, sel.Sel.Name, sel.Sel.Name)
					}
					continue
				}
				switch tt := ts.Type.(type) {
				case *ast.StructType:
					fields := exportedFields(tt.Fields)
					if len(fields) == 0 && !strings.Contains(doc, "opaque") {
						t.Errorf("%s: struct %s has no exported field; if it is meant to be opaque, its doc comment must say so", where(ts), ts.Name.Name)
					}
					for _, fd := range fields {
						if ref := internalRef(fd.Type); ref != "" {
							t.Errorf("%s: field of %s has the type %s, an internal package's", where(fd), ts.Name.Name, ref)
						}
					}
				case *ast.InterfaceType:
					for _, m := range exportedFields(tt.Methods) {
						if ref := internalRef(m.Type); ref != "" {
							t.Errorf("%s: a method of %s mentions %s, an internal package's type", where(m), ts.Name.Name, ref)
						}
					}
				default:
					if ref := internalRef(ts.Type); ref != "" {
						t.Errorf("%s: type %s is defined on %s, an internal package's type, so go doc shows nothing of it", where(ts), ts.Name.Name, ref)
					}
				}
			}
		}
	}
}

// embeddedName is the name of the type in an embedded field or a
// receiver: T, *T, pkg.T, T[P].
func embeddedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.IndexExpr:
		return embeddedName(x.X)
	case *ast.IndexListExpr:
		return embeddedName(x.X)
	}
	return ""
}
