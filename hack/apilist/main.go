// Command apilist writes the exported Go API of the packages users import — api/... and
// pkg/... — one declaration a line, sorted, into api/exported/<package>.txt (as Go keeps
// api/go1.*.txt). `make verify` runs it and fails when a file changes: an exported name,
// signature, field or constant that changed without its listing shows up in review, and
// the change belongs in CHANGELOG.md.
package main

import (
	"flag"
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	out := flag.String("out", "api/exported", "Where to write one listing per package.")
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./api/...", "./pkg/..."}
	}
	if err := run(*out, patterns); err != nil {
		fmt.Fprintln(os.Stderr, "apilist:", err)
		os.Exit(1)
	}
}

func run(out string, patterns []string) error {
	// Types come from the compiler's export data; -race reads those of the build `make lint`
	// and `make test` compile, so listing compiles nothing of its own (on a cold machine, the
	// default build was 5 min of compiling). No file here depends on the race tag.
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedTypes, BuildFlags: []string{"-race"}}, patterns...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(out, "*.txt"))
	keep := map[string]bool{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		file := filepath.Join(out, fileName(p.PkgPath)+".txt")
		keep[file] = true
		text := "# The exported API of " + p.PkgPath + ", written by hack/apilist (make verify). Change it on purpose, and say so in CHANGELOG.md.\n" +
			strings.Join(list(p.Types), "\n") + "\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			return err
		}
	}
	for _, f := range old {
		if !keep[f] {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileName is the package path below the module, with / as -: pkg-holder, api-v1alpha1.
func fileName(pkgPath string) string {
	_, rel, _ := strings.Cut(pkgPath, "github.com/fencedlease/fencedlease/")
	return strings.ReplaceAll(rel, "/", "-")
}

// list is one line per exported declaration of pkg: constants with their values,
// variables, functions, types with their exported fields and methods.
func list(pkg *types.Package) []string {
	q := types.RelativeTo(pkg)
	var lines []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			lines = append(lines, fmt.Sprintf("const %s %s = %s", o.Name(), types.TypeString(o.Type(), q), o.Val().ExactString()))
		case *types.Var:
			lines = append(lines, fmt.Sprintf("var %s %s", o.Name(), types.TypeString(o.Type(), q)))
		case *types.Func:
			lines = append(lines, "func "+o.Name()+strings.TrimPrefix(types.TypeString(o.Type(), q), "func"))
		case *types.TypeName:
			lines = append(lines, typeLines(o, q)...)
		}
	}
	slices.Sort(lines)
	return lines
}

func typeLines(o *types.TypeName, q types.Qualifier) []string {
	head := "type " + o.Name()
	if tp := typeParams(o.Type(), q); tp != "" {
		head += tp
	}
	if o.IsAlias() {
		return []string{head + " = " + types.TypeString(types.Unalias(o.Type()), q)}
	}
	under := o.Type().Underlying()
	var lines []string
	switch u := under.(type) {
	case *types.Struct:
		lines = append(lines, head+" struct")
		for i := range u.NumFields() {
			if f := u.Field(i); f.Exported() {
				embedded := ""
				if f.Embedded() {
					embedded = ", embedded"
				}
				lines = append(lines, fmt.Sprintf("%s struct, %s %s%s", head, f.Name(), types.TypeString(f.Type(), q), embedded))
			}
		}
	case *types.Interface:
		lines = append(lines, head+" interface")
		for i := range u.NumMethods() {
			if m := u.Method(i); m.Exported() {
				lines = append(lines, fmt.Sprintf("%s interface, %s%s", head, m.Name(), strings.TrimPrefix(types.TypeString(m.Type(), q), "func")))
			}
		}
	default:
		lines = append(lines, head+" "+types.TypeString(under, q))
	}
	if named, ok := o.Type().(*types.Named); ok {
		for i := range named.NumMethods() {
			m := named.Method(i)
			if !m.Exported() {
				continue
			}
			recv := m.Type().(*types.Signature).Recv().Type()
			lines = append(lines, fmt.Sprintf("method (%s) %s%s", types.TypeString(recv, q), m.Name(),
				strings.TrimPrefix(types.TypeString(m.Type(), q), "func")))
		}
	}
	return lines
}

func typeParams(t types.Type, q types.Qualifier) string {
	named, ok := t.(*types.Named)
	if !ok || named.TypeParams().Len() == 0 {
		return ""
	}
	var ps []string
	for i := range named.TypeParams().Len() {
		p := named.TypeParams().At(i)
		ps = append(ps, p.Obj().Name()+" "+types.TypeString(p.Constraint(), q))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}
