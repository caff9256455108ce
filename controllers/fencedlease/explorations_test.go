package fencedlease

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestExplorationsApartAreNamed: make test leaves every test that calls
// oneExplorationAtATime out of its race run and runs those hack/test.sh names apart, so a
// new exploration missing from that list would run nowhere in make test.
func TestExplorationsApartAreNamed(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^explorations='\^\(([A-Za-z|]+)\)\$'$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("hack/test.sh names no explorations='^(TestA|TestB)$'")
	}
	named := strings.Split(string(m[1]), "|")
	slices.Sort(named)

	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var calling []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "oneExplorationAtATime" {
						calling = append(calling, fn.Name.Name)
						return false
					}
				}
				return true
			})
		}
	}
	slices.Sort(calling)
	calling = slices.Compact(calling)
	if len(calling) == 0 || !slices.Equal(named, calling) {
		t.Errorf("hack/test.sh runs apart %v; the tests that call oneExplorationAtATime are %v", named, calling)
	}
}
