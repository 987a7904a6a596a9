// Command kgo-tests prints the names of the integration tests of a franz-go pkg/kgo source
// directory, one a line: the Test functions of its *_test.go files that reach, through the
// functions and methods they mention, the helpers that dial a broker (adm, newTestClient,
// testClientOpts, getSeedBrokers, or a literal naming KGO_SEEDS). The other Test functions
// are unit tests (no broker). Usage: go run . DIR    (compat/conformance/kgo.sh runs it)
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kgo-tests DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*_test.go"))
	if err != nil || len(files) == 0 {
		fmt.Fprintln(os.Stderr, "kgo-tests: no *_test.go in", os.Args[1])
		os.Exit(1)
	}
	// mentions[f]: the identifiers a top-level function (or method, as ".name") mentions;
	// methods are matched by name alone, which can only over-approximate.
	mentions := map[string]map[string]bool{}
	var tests []string
	fset := token.NewFileSet()
	for _, file := range files {
		parsed, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kgo-tests:", err)
			os.Exit(1)
		}
		for _, decl := range parsed.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil {
				name = "." + name
			} else if strings.HasPrefix(name, "Test") && name != "TestMain" {
				tests = append(tests, name)
			}
			seen := mentions[name]
			if seen == nil {
				seen = map[string]bool{}
				mentions[name] = seen
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.Ident:
					seen[x.Name] = true
				case *ast.SelectorExpr:
					seen["."+x.Sel.Name] = true
				case *ast.BasicLit:
					if strings.Contains(x.Value, "KGO_SEEDS") {
						seen["KGO_SEEDS"] = true
					}
				}
				return true
			})
		}
	}
	broker := map[string]bool{"adm": true, "newTestClient": true, "testClientOpts": true,
		"getSeedBrokers": true, "KGO_SEEDS": true}
	for changed := true; changed; {
		changed = false
		for fn, seen := range mentions {
			if broker[fn] {
				continue
			}
			for id := range seen {
				if broker[id] {
					broker[fn], changed = true, true
					break
				}
			}
		}
	}
	sort.Strings(tests)
	for _, t := range tests {
		if broker[t] {
			fmt.Println(t)
		}
	}
}
