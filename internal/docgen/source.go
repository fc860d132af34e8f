package docgen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Module is the Go source of one module, parsed without type checking: its packages (test files
// left out) by import path. Folders holding a go.mod of their own (nested modules), testdata and
// folders whose name starts with "." or "_" are not part of it, as for the go command.
type Module struct {
	// Root is the folder of go.mod; Path the module path it declares.
	Root string
	Path string
	Fset *token.FileSet

	pkgs map[string]*srcPackage
}

// srcPackage is one package of a Module.
type srcPackage struct {
	path  string // import path
	dir   string // relative to the module root, "." for the root
	name  string
	files []*ast.File
	types map[string]*typeDecl
}

// typeDecl is a named type's declaration and the file it is in (for its imports).
type typeDecl struct {
	pkg  *srcPackage
	file *ast.File
	spec *ast.TypeSpec
	doc  string
}

// LoadModule parses the Go files of the module whose go.mod is in root.
func LoadModule(root string) (*Module, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("read go.mod: %w", err)
	}
	m := &Module{Root: root, Fset: token.NewFileSet(), pkgs: map[string]*srcPackage{}}
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			m.Path = strings.Trim(f[1], `"`)
			break
		}
	}
	if m.Path == "" {
		return nil, errors.New("go.mod names no module")
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel != "." {
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		return m.parseDir(p, filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, fmt.Errorf("parse module %s: %w", root, err)
	}
	return m, nil
}

// parseDir parses the non-test Go files of one folder, if it has any.
func (m *Module) parseDir(dir, rel string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	importPath := m.Path
	if rel != "." {
		importPath = m.Path + "/" + rel
	}
	var pkg *srcPackage
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(m.Fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if pkg == nil {
			pkg = &srcPackage{path: importPath, dir: rel, name: f.Name.Name, types: map[string]*typeDecl{}}
			m.pkgs[importPath] = pkg
		}
		pkg.files = append(pkg.files, f)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if _, dup := pkg.types[ts.Name.Name]; !dup { // the first of files with build constraints
					pkg.types[ts.Name.Name] = &typeDecl{pkg: pkg, file: f, spec: ts, doc: doc.Text()}
				}
			}
		}
	}
	return nil
}

// Packages returns the import paths of the module's packages, sorted.
func (m *Module) Packages() []string {
	out := make([]string, 0, len(m.pkgs))
	for p := range m.pkgs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// lookup returns the declaration of the type name in the package of importPath.
func (m *Module) lookup(importPath, name string) (*typeDecl, error) {
	pkg, ok := m.pkgs[importPath]
	if !ok {
		return nil, fmt.Errorf("package %s not in module %s", importPath, m.Path)
	}
	d, ok := pkg.types[name]
	if !ok {
		return nil, fmt.Errorf("type %s.%s not found", importPath, name)
	}
	return d, nil
}

// importPathOf returns the import path that the package name refers to in file, and whether the
// file imports it.
func (m *Module) importPathOf(file *ast.File, name string) (string, bool) {
	for _, imp := range file.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		if imp.Name != nil {
			if imp.Name.Name == name {
				return p, true
			}
			continue
		}
		if pkg, ok := m.pkgs[p]; ok {
			if pkg.name == name {
				return p, true
			}
			continue
		}
		// Outside the module: the last element, without a major version suffix.
		base := path.Base(p)
		if strings.HasPrefix(base, "v") && len(base) > 1 && strings.Trim(base[1:], "0123456789") == "" {
			base = path.Base(path.Dir(p))
		}
		if base == name {
			return p, true
		}
	}
	return "", false
}
