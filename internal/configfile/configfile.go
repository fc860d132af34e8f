package configfile

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong in a configuration: where (the file and line, or the --set that
// gave it), which key, and what to do.
type Problem struct {
	// File is the configuration file's name, or "--set" for a command-line override.
	File string
	// Line is the 1-based line in File (0 when unknown).
	Line int
	// Key is the dotted path of the key, e.g. "audit.queue.maxBytes".
	Key string
	// Msg says what is wrong and what to write instead.
	Msg string
}

// String is "file:line: key: msg".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error is every problem of one configuration, one a line.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Options says how Decode reads a configuration.
type Options struct {
	// File names the configuration in problems ("" when there is no file: only Sets).
	File string
	// Sets are command-line overrides KEY.PATH=VALUE, applied after the file; VALUE is YAML
	// ("30m", "10Gi", "[a, b]", "{k: v}").
	Sets []string
	// Moved maps keys that moved to where they are now (dotted paths), so that an old file is
	// told what to change.
	Moved map[string]string
}

// Decode reads the YAML data into out (a pointer to a struct with yaml tags), strictly: every
// unknown key, value of the wrong type and malformed override is a Problem of the returned
// *Error, each with its line and, where it helps, the closest known key or an example of a valid
// value. Sizes can be written with a unit ("512Mi", "10Gi", "1G") for the integer keys whose name
// says bytes. Keys of a type that decodes itself (yaml.Unmarshaler) are that type's to check.
func Decode(data []byte, out any, o Options) error {
	file := o.File
	if file == "" {
		file = "--set"
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return &Error{Problems: []Problem{syntaxProblem(file, err)}}
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if doc.Kind == 0 || (root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	d := &decoder{file: file, moved: o.Moved}
	if root.Kind != yaml.MappingNode {
		d.add(root, "", "the configuration must be a mapping of keys (key: value)")
		return d.err()
	}
	for _, s := range o.Sets {
		d.set(root, s)
	}
	t := reflect.TypeOf(out)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("configfile: out must be a pointer to a struct, not %T", out)
	}
	d.walk(root, t.Elem(), "")
	if len(d.problems) > 0 {
		return d.err()
	}
	if err := root.Decode(out); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				d.problems = append(d.problems, typeErrorProblem(file, msg))
			}
			return d.err()
		}
		return &Error{Problems: []Problem{{File: file, Msg: err.Error()}}}
	}
	return nil
}

// decoder collects the problems of one Decode.
type decoder struct {
	file     string
	moved    map[string]string
	problems []Problem
	fromSet  map[*yaml.Node]string // nodes an override wrote: their problems name the override
}

func (d *decoder) add(n *yaml.Node, key, msg string) {
	p := Problem{File: d.file, Line: n.Line, Key: key, Msg: msg}
	if s, ok := d.fromSet[n]; ok {
		p.File, p.Line = "--set "+s, 0
	}
	d.problems = append(d.problems, p)
}

func (d *decoder) err() error {
	if len(d.problems) == 0 {
		return nil
	}
	sort.SliceStable(d.problems, func(i, j int) bool {
		a, b := d.problems[i], d.problems[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return &Error{Problems: d.problems}
}

var (
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	oldUnmarshalerType  = reflect.TypeFor[interface{ UnmarshalYAML(func(any) error) error }]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType        = reflect.TypeFor[time.Duration]()
)

// field is one yaml key of a struct type.
type field struct {
	key string
	typ reflect.Type
}

// fields returns the yaml keys of struct type t, inline structs flattened, in order.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, field{key: name, typ: f.Type})
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// walk checks node against type t at path: unknown keys, scalars of the wrong kind; and rewrites
// sizes written with a unit into integers.
func (d *decoder) walk(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(oldUnmarshalerType) {
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			d.add(n, path, "want a single value, not a "+kindName(n))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.add(n, path, "want a mapping of keys, not a "+kindName(n))
			return
		}
		fs := fields(t)
		byKey := make(map[string]reflect.Type, len(fs))
		for _, f := range fs {
			byKey[f.key] = f.typ
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := join(path, k.Value)
			ft, ok := byKey[k.Value]
			if !ok {
				d.add(k, kp, d.unknown(kp, k.Value, fs))
				continue
			}
			if seen[k.Value] {
				d.add(k, kp, "set twice in the same mapping")
			}
			seen[k.Value] = true
			d.walk(v, ft, kp)
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.add(n, path, "want a list ([a, b] or one \"- item\" a line), not a "+kindName(n))
			return
		}
		for i, item := range n.Content {
			d.walk(item, t.Elem(), path+"["+strconv.Itoa(i)+"]")
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(n, path, "want a mapping of keys, not a "+kindName(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case reflect.Interface:
	default:
		d.scalar(n, t, path)
	}
}

// scalar checks a scalar value of type t.
func (d *decoder) scalar(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.ScalarNode {
		d.add(n, path, "want a single value, not a "+kindName(n))
		return
	}
	v := n.Value
	switch {
	case t == durationType:
		if n.Tag == "!!int" && v == "0" {
			return
		}
		if _, err := time.ParseDuration(v); err != nil {
			d.add(n, path, fmt.Sprintf("%q is not a duration: write a number with a unit, such as 30s, 5m or 168h", v))
		}
	case t.Kind() == reflect.Bool:
		if n.Tag != "!!bool" {
			d.add(n, path, fmt.Sprintf("%q is not a boolean: write true or false", v))
		}
	case isInt(t.Kind()):
		if n.Tag == "!!int" {
			if _, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 0, 64); err == nil {
				return
			}
		}
		if sizeKey(path) {
			size, err := ParseSize(v)
			if err != nil {
				d.add(n, path, fmt.Sprintf("%q is not a size: write bytes or a number with a unit, such as 512Mi, 10Gi or 1G", v))
				return
			}
			n.Tag, n.Value, n.Style = "!!int", strconv.FormatInt(size, 10), 0
			return
		}
		d.add(n, path, fmt.Sprintf("%q is not a whole number", v))
	case isUint(t.Kind()):
		if n.Tag != "!!int" || strings.HasPrefix(v, "-") {
			d.add(n, path, fmt.Sprintf("%q is not a whole number of at least 0", v))
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			d.add(n, path, fmt.Sprintf("%q is not a number", v))
		}
	}
}

func isInt(k reflect.Kind) bool {
	return k == reflect.Int || k == reflect.Int8 || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64
}

func isUint(k reflect.Kind) bool {
	return k == reflect.Uint || k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 || k == reflect.Uint64
}

// sizeKey reports whether the key at path holds a number of bytes: its name says so.
func sizeKey(path string) bool {
	last := path[strings.LastIndexByte(path, '.')+1:]
	return strings.Contains(strings.ToLower(last), "bytes")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "single value"
	}
}

// unknown says what to do about an unknown key: where it moved, or the closest known key.
func (d *decoder) unknown(path, key string, fs []field) string {
	if to, ok := d.moved[path]; ok {
		return "this key moved: write it as " + to
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.key
	}
	if best, ok := Closest(key, names); ok {
		return "unknown key; did you mean " + best + "?"
	}
	if len(names) > 12 {
		return "unknown key (see docs/reference/config.md)"
	}
	return "unknown key; the keys here are " + strings.Join(names, ", ")
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest returns the candidate closest to s (case-insensitive edit distance), if it is close
// enough to be a likely misspelling.
func Closest(s string, candidates []string) (string, bool) {
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		if dist := distance(strings.ToLower(s), strings.ToLower(c)); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	return best, best != "" && bestDist <= max(2, len(s)/3)
}

// set applies one KEY.PATH=VALUE override to the mapping root.
func (d *decoder) set(root *yaml.Node, s string) {
	key, value, ok := strings.Cut(s, "=")
	bad := func(msg string) {
		d.problems = append(d.problems, Problem{File: "--set " + s, Msg: msg})
	}
	if !ok || key == "" {
		bad("want KEY.PATH=VALUE, e.g. --set store.maxBytes=10Gi")
		return
	}
	var v yaml.Node
	if err := yaml.Unmarshal([]byte(value), &v); err != nil {
		bad("the value is not YAML: " + err.Error())
		return
	}
	val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}
	if v.Kind == yaml.DocumentNode && len(v.Content) > 0 {
		val = v.Content[0]
	}
	parts := strings.Split(key, ".")
	n := root
	for i, p := range parts {
		if p == "" {
			bad("empty key in " + key)
			return
		}
		if n.Kind != yaml.MappingNode {
			bad(strings.Join(parts[:i], ".") + " is not a mapping")
			return
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == p {
				next = n.Content[j+1]
				if i == len(parts)-1 {
					n.Content[j+1] = val
					d.markSet(val, s)
					return
				}
			}
		}
		if next == nil {
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}
			d.markSet(k, s)
			if i == len(parts)-1 {
				n.Content = append(n.Content, k, val)
				d.markSet(val, s)
				return
			}
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			d.markSet(next, s)
			n.Content = append(n.Content, k, next)
		}
		n = next
	}
}

// markSet records that the nodes of n came from the override s.
func (d *decoder) markSet(n *yaml.Node, s string) {
	if d.fromSet == nil {
		d.fromSet = map[*yaml.Node]string{}
	}
	d.fromSet[n] = s
	for _, c := range n.Content {
		d.markSet(c, s)
	}
}

// syntaxProblem turns a YAML syntax error ("yaml: line 3: mapping values are not allowed in this
// context") into a Problem with its line.
func syntaxProblem(file string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(num); err == nil {
				return Problem{File: file, Line: line, Msg: "not valid YAML: " + tail}
			}
		}
	}
	return Problem{File: file, Msg: "not valid YAML: " + msg}
}

// typeErrorProblem turns one message of a *yaml.TypeError ("line 3: cannot unmarshal ...") into a
// Problem.
func typeErrorProblem(file, msg string) Problem {
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(num); err == nil {
				return Problem{File: file, Line: line, Msg: tail}
			}
		}
	}
	return Problem{File: file, Msg: msg}
}

// sizeUnits are the units ParseSize reads, as Kubernetes quantities and IEC and SI byte units.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	{"B", 1},
}

// ParseSize reads a number of bytes written as people write it: 1048576, 512Mi, 10Gi, 1.5Gi,
// 64KiB, 1G (10^9), 100k. A fraction is rounded down to whole bytes.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: no number", s)
	}
	if n, err := strconv.ParseInt(strings.ReplaceAll(num, "_", ""), 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q is negative", s)
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("size %q: want a number with an optional unit such as Mi or Gi", s)
	}
	if f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(f * float64(mult)), nil
}

// Marshal renders v as YAML with two-space indentation.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("configfile: %w", err)
	}
	if err := enc.Close(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("configfile: %w", err)
	}
	return buf.Bytes(), nil
}
