// Command apisurface counts the exported names a module promises to its users: exported types,
// functions, methods, variables, constants, struct fields and interface methods in non-test,
// non-generated Go files outside internal/, examples/, e2e/ and testdata/ folders.
//
// scripts/api-surface.sh runs it; -v lists the count per package, -names prints every name.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	root := flag.String("root", ".", "module root")
	verbose := flag.Bool("v", false, "print the count of each package")
	names := flag.Bool("names", false, "print every exported name")
	max := flag.Int("max", 0, "fail when the total is above this (0: no limit)")
	flag.Parse()
	perPkg, all, err := count(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apisurface:", err)
		os.Exit(1)
	}
	if *names {
		for _, n := range all {
			fmt.Println(n)
		}
	}
	if *verbose {
		pkgs := make([]string, 0, len(perPkg))
		for p := range perPkg {
			pkgs = append(pkgs, p)
		}
		sort.Slice(pkgs, func(i, j int) bool { return perPkg[pkgs[i]] > perPkg[pkgs[j]] })
		for _, p := range pkgs {
			fmt.Printf("%6d  %s\n", perPkg[p], p)
		}
	}
	fmt.Printf("exported names: %d\n", len(all))
	if *max > 0 && len(all) > *max {
		fmt.Fprintf(os.Stderr, "apisurface: %d exported names, the limit is %d\n", len(all), *max)
		os.Exit(1)
	}
}

// skipDir reports whether a folder holds no public surface of the root module.
func skipDir(rel string, d fs.DirEntry) bool {
	name := d.Name()
	if rel == "." {
		return false
	}
	if strings.HasPrefix(name, ".") || name == "internal" || name == "examples" || name == "e2e" ||
		name == "testdata" || name == "node_modules" {
		return true
	}
	// A nested module is not part of this one.
	return rel != "." && fileExists(filepath.Join(rel, "go.mod"))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func count(root string) (map[string]int, []string, error) {
	perPkg := map[string]int{}
	var all []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skipDir(filepath.Join(root, rel), d) && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		if ast.IsGenerated(f) || f.Name.Name == "main" {
			return nil
		}
		pkg := filepath.Dir(rel)
		prefix := pkg + "." // the root package's names are ".Name"
		if pkg == "." {
			prefix = "."
		}
		add := func(name string) {
			perPkg[pkg]++
			all = append(all, prefix+name)
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() {
					continue
				}
				if decl.Recv != nil {
					recv := receiverName(decl.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue // a method of an unexported type is reachable only through an interface
					}
					add(recv + "." + decl.Name.Name)
					continue
				}
				add(decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if !spec.Name.IsExported() {
							continue
						}
						add(spec.Name.Name)
						members(spec.Name.Name, spec.Type, add)
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if n.IsExported() {
								add(n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	sort.Strings(all)
	return perPkg, all, err
}

// members adds the exported fields of a struct and the methods of an interface.
func members(owner string, t ast.Expr, add func(string)) {
	switch t := t.(type) {
	case *ast.StructType:
		for _, f := range t.Fields.List {
			for _, n := range f.Names {
				if n.IsExported() {
					add(owner + "." + n.Name)
				}
			}
			if len(f.Names) == 0 { // embedded: promoted, counted where declared
				continue
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					add(owner + "." + n.Name)
				}
			}
		}
	}
}

func receiverName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
