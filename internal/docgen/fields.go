package docgen

import (
	"fmt"
	"go/ast"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Field is one key of a configuration, as a decoder following struct tags sees it.
type Field struct {
	// Path is the key path from the root: keys joined by ".", "[]" after a list of objects
	// (audit.forward[].url), "<name>" for the keys of a map of objects.
	Path string
	// Type is the YAML-level type: string, bool, integer, number, duration, object, any, "list of
	// T", "map of T", or a type from outside the module as pkg.Name.
	Type string
	// Doc is the field's doc comment (or, without one, its type's), as plain text; paragraphs are
	// separated by a blank line. Go field names of the same struct are written as their keys.
	Doc string
	// Object reports that the field is a struct (or a list or map of structs) whose keys follow it.
	Object bool
}

// ConfigFields returns every key of the struct type typeName of the package importPath and of
// the structs it holds, depth first in field order, following the tag of tagKey ("yaml" or
// "json"): a tag's name is the key, "-" leaves the field out, ",inline" lifts the keys of a struct
// into its parent; without a name the key is the field's name lowercased for yaml, as is for json
// (and json inlines embedded structs).
func (m *Module) ConfigFields(importPath, typeName, tagKey string) ([]Field, error) {
	d, err := m.lookup(importPath, typeName)
	if err != nil {
		return nil, err
	}
	w := &fieldWalker{m: m, tag: tagKey, onPath: map[*typeDecl]bool{}}
	t, err := w.named(d)
	if err != nil {
		return nil, err
	}
	if t.strct == nil {
		return nil, fmt.Errorf("%s.%s is not a struct", importPath, typeName)
	}
	if err := w.structFields(t, ""); err != nil {
		return nil, err
	}
	return w.out, nil
}

// rtype is a resolved type expression.
type rtype struct {
	kind  string // basic, duration, struct, list, map, any, external
	name  string // basic: the Go name; external: pkg.Name
	elem  *rtype // list, map
	strct *ast.StructType
	file  *ast.File // where strct is declared (for its imports)
	pkg   *srcPackage
	decl  *typeDecl // the named type, if any
}

type fieldWalker struct {
	m      *Module
	tag    string
	out    []Field
	onPath map[*typeDecl]bool // named structs being walked (recursive types stop)
}

var basicKinds = map[string]string{
	"string": "string", "bool": "bool", "byte": "integer", "rune": "integer",
	"int": "integer", "int8": "integer", "int16": "integer", "int32": "integer", "int64": "integer",
	"uint": "integer", "uint8": "integer", "uint16": "integer", "uint32": "integer", "uint64": "integer",
	"float32": "number", "float64": "number", "any": "any",
}

// resolve resolves the type expression e of file in pkg.
func (w *fieldWalker) resolve(e ast.Expr, pkg *srcPackage, file *ast.File) (*rtype, error) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return w.resolve(e.X, pkg, file)
	case *ast.StarExpr:
		return w.resolve(e.X, pkg, file)
	case *ast.Ident:
		if k, ok := basicKinds[e.Name]; ok {
			return &rtype{kind: k, name: e.Name}, nil
		}
		d, ok := pkg.types[e.Name]
		if !ok {
			return nil, fmt.Errorf("%s: type %s not found", pkg.path, e.Name)
		}
		return w.named(d)
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, fmt.Errorf("%s: unexpected type expression %T", pkg.path, e.X)
		}
		p, ok := w.m.importPathOf(file, x.Name)
		if !ok {
			return nil, fmt.Errorf("%s: package %s not imported", pkg.path, x.Name)
		}
		if p == "time" && e.Sel.Name == "Duration" {
			return &rtype{kind: "duration"}, nil
		}
		if _, in := w.m.pkgs[p]; !in {
			return &rtype{kind: "external", name: x.Name + "." + e.Sel.Name}, nil
		}
		d, err := w.m.lookup(p, e.Sel.Name)
		if err != nil {
			return nil, err
		}
		return w.named(d)
	case *ast.ArrayType:
		elem, err := w.resolve(e.Elt, pkg, file)
		if err != nil {
			return nil, err
		}
		return &rtype{kind: "list", elem: elem}, nil
	case *ast.MapType:
		elem, err := w.resolve(e.Value, pkg, file)
		if err != nil {
			return nil, err
		}
		return &rtype{kind: "map", elem: elem}, nil
	case *ast.StructType:
		return &rtype{kind: "struct", strct: e, file: file, pkg: pkg}, nil
	case *ast.InterfaceType:
		return &rtype{kind: "any"}, nil
	}
	return nil, fmt.Errorf("%s: type expression %T has no YAML form", pkg.path, e)
}

// named resolves a declared type: an alias to what it names, a defined type to its underlying
// type, remembering the declaration.
func (w *fieldWalker) named(d *typeDecl) (*rtype, error) {
	t, err := w.resolve(d.spec.Type, d.pkg, d.file)
	if err != nil {
		return nil, err
	}
	if d.spec.Assign.IsValid() {
		return t, nil
	}
	c := *t
	c.decl = d
	return &c, nil
}

// typeName renders t for the reference.
func typeName(t *rtype) string {
	switch t.kind {
	case "struct":
		return "object"
	case "list":
		return "list of " + typeName(t.elem)
	case "map":
		return "map of " + typeName(t.elem)
	case "external":
		return t.name
	}
	return t.kind
}

// objectOf returns the struct whose keys follow a field of type t (itself, or the element of a
// list or a map) and the path element that leads to them.
func objectOf(t *rtype) (*rtype, string) {
	switch {
	case t.kind == "struct":
		return t, ""
	case t.kind == "list" && t.elem.kind == "struct":
		return t.elem, "[]"
	case t.kind == "map" && t.elem.kind == "struct":
		return t.elem, ".<name>"
	}
	return nil, ""
}

// structFields appends the fields of the struct t under prefix.
func (w *fieldWalker) structFields(t *rtype, prefix string) error {
	if t.decl != nil {
		if w.onPath[t.decl] {
			return nil
		}
		w.onPath[t.decl] = true
		defer delete(w.onPath, t.decl)
	}
	var entries []fieldEntry
	keys := map[string]string{} // Go field name -> key, for the docs
	for _, f := range t.strct.Fields.List {
		tag := ""
		if f.Tag != nil {
			if s, err := strconv.Unquote(f.Tag.Value); err == nil {
				tag = reflect.StructTag(s).Get(w.tag)
			}
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		inline := strings.Contains(","+opts+",", ",inline,")
		names := f.Names
		if len(names) == 0 { // embedded
			id := embeddedName(f.Type)
			if id == nil {
				continue
			}
			if w.tag == "json" && name == "" {
				inline = true
			}
			names = []*ast.Ident{id}
		}
		for _, n := range names {
			if !n.IsExported() {
				continue
			}
			key := name
			if key == "" {
				key = n.Name
				if w.tag == "yaml" {
					key = strings.ToLower(n.Name)
				}
			}
			entries = append(entries, fieldEntry{key: key, goName: n.Name, field: f, inline: inline})
			if !inline {
				keys[n.Name] = key
			}
		}
	}
	for _, e := range entries {
		ft, err := w.resolve(e.field.Type, t.pkg, t.file)
		if err != nil {
			return fmt.Errorf("%s%s: %w", prefix, e.key, err)
		}
		if e.inline {
			if ft.kind != "struct" {
				continue // an inline map (unknown keys kept): no keys of its own
			}
			if err := w.structFields(ft, prefix); err != nil {
				return err
			}
			continue
		}
		doc := e.field.Doc.Text()
		if doc == "" {
			doc = e.field.Comment.Text()
		}
		docKeys := keys
		obj, sub := objectOf(ft)
		if doc == "" && obj != nil && obj.decl != nil {
			doc, docKeys = typeDoc(obj.decl), fieldKeys(obj, w.tag)
		}
		if doc == "" {
			doc = seeSibling(e.goName, entries, keys, prefix)
		}
		path := prefix + e.key
		w.out = append(w.out, Field{Path: path, Type: typeName(ft), Doc: keysInDoc(doc, docKeys), Object: obj != nil})
		if obj != nil {
			if err := w.structFields(obj, path+sub+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldEntry is a key of a struct.
type fieldEntry struct {
	key, goName string
	field       *ast.Field
	inline      bool
}

// seeSibling is the doc of a field that has none but that a sibling's doc names, first among
// the names it starts with ("QPS and Burst limit ..."), else anywhere: a pointer to that sibling.
func seeSibling(goName string, entries []fieldEntry, keys map[string]string, prefix string) string {
	for _, e := range entries {
		if e.goName == goName {
			continue
		}
		for _, n := range leadingNames(e.field.Doc.Text(), keys) {
			if n == goName {
				return "See " + "`" + prefix + e.key + "`" + "."
			}
		}
	}
	for _, e := range entries { // named further on in a sibling's doc
		if e.goName == goName {
			continue
		}
		for _, w := range goIdent.FindAllString(e.field.Doc.Text(), -1) {
			if w == goName {
				return "See " + "`" + prefix + e.key + "`" + "."
			}
		}
	}
	return ""
}

// fieldKeys maps the Go names of the fields of struct t to their keys.
func fieldKeys(t *rtype, tagKey string) map[string]string {
	keys := map[string]string{}
	for _, f := range t.strct.Fields.List {
		tag := ""
		if f.Tag != nil {
			if s, err := strconv.Unquote(f.Tag.Value); err == nil {
				tag = reflect.StructTag(s).Get(tagKey)
			}
		}
		name, _, _ := strings.Cut(tag, ",")
		for _, n := range f.Names {
			if name == "-" || !n.IsExported() {
				continue
			}
			key := name
			if key == "" {
				key = n.Name
				if tagKey == "yaml" {
					key = strings.ToLower(n.Name)
				}
			}
			keys[n.Name] = key
		}
	}
	return keys
}

// embeddedName is the name an embedded field takes.
func embeddedName(e ast.Expr) *ast.Ident {
	switch e := e.(type) {
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	}
	return nil
}

var (
	goIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// leadNames matches the names a doc comment starts with: "QPS and Burst limit", "Group,
	// Version and Resource of".
	leadNames = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*(?:(?:, | and |, and )[A-Z][A-Za-z0-9]*)*`)
)

// leadingNames returns the Go names that doc starts with, if they are all names of keys.
func leadingNames(doc string, keys map[string]string) []string {
	m := leadNames.FindString(doc)
	if m == "" {
		return nil
	}
	names := goIdent.FindAllString(strings.ReplaceAll(m, " and ", ", "), -1)
	for _, n := range names {
		if n == "and" {
			continue
		}
		if _, ok := keys[n]; !ok {
			return nil
		}
	}
	var out []string
	for _, n := range names {
		if n != "and" {
			out = append(out, n)
		}
	}
	return out
}

// compoundName reports whether a Go name is made of several words (DataDir, HTTPAuth), so that
// it cannot be an ordinary word of the text (Cluster, Jaeger, OTLP can).
func compoundName(s string) bool {
	upper, lower := 0, 0
	for _, c := range s {
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		}
	}
	return upper >= 2 && lower >= 1
}

// keysInDoc writes Go field names in doc as their keys in backquotes ("DataDir holds" becomes
// "`dataDir` holds"): the names the comment starts with, and elsewhere the names made of several
// words, except where they are qualified (Config.Role, Role.x) or already in backquotes.
func keysInDoc(doc string, keys map[string]string) string {
	if len(keys) == 0 {
		return doc
	}
	lead := len(leadNames.FindString(doc))
	if leadingNames(doc, keys) == nil {
		lead = 0
	}
	var b strings.Builder
	last := 0
	for _, loc := range goIdent.FindAllStringIndex(doc, -1) {
		word := doc[loc[0]:loc[1]]
		key, ok := keys[word]
		if !ok || loc[1] > lead && !compoundName(word) {
			continue
		}
		before, after := byte(' '), byte(' ')
		if loc[0] > 0 {
			before = doc[loc[0]-1]
		}
		if loc[1] < len(doc) {
			after = doc[loc[1]]
		}
		if before == '.' || before == '`' || after == '`' || (after == '.' && loc[1]+1 < len(doc) && isIdentByte(doc[loc[1]+1])) {
			continue
		}
		b.WriteString(doc[last:loc[0]])
		b.WriteString("`" + key + "`")
		last = loc[1]
	}
	b.WriteString(doc[last:])
	return b.String()
}

// typeDoc is the doc comment of a named type for a field of that type: without the type's name
// when a verb follows it ("Config configures the sink." becomes "Configures the sink.", "Spec is
// what ..." stays).
func typeDoc(d *typeDecl) string {
	doc := d.doc
	rest, ok := strings.CutPrefix(doc, d.spec.Name.Name+" ")
	verb, _, _ := strings.Cut(rest, " ")
	if ok && strings.HasSuffix(verb, "s") && verb != "is" && verb != "was" && verb != "has" {
		doc = strings.ToUpper(rest[:1]) + rest[1:]
	}
	return doc
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
