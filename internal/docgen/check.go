package docgen

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Markers: an HTML comment on the line before a fenced block.
const (
	// MarkerRun marks a shell block that runs without a cluster: Check runs it.
	MarkerRun = "docs:run"
)

// YAMLCheck is a kind of YAML block that Check loads.
type YAMLCheck struct {
	// Name is what the block is, for messages (the all-in-one's configuration).
	Name string
	// Marker, when set, makes every block with that marker (<!-- docs:... -->) of this kind.
	Marker string
	// Match makes a block without a marker of this kind: it is given the block's first top-level
	// key ("" when it starts otherwise) and its text.
	Match func(firstKey, body string) bool
	// Load loads the block and reports what is wrong with it.
	Load func(data []byte) error
}

// CheckOptions is what Check checks and how.
type CheckOptions struct {
	// Root is the repository root: links and paths resolve inside it.
	Root string
	// Files are the Markdown files to check, relative to Root.
	Files []string
	// YAML are the kinds of YAML blocks that are loaded; other YAML blocks are not checked.
	YAML []YAMLCheck
	// Run runs the blocks marked docs:run, each within RunTimeout.
	Run        bool
	RunTimeout time.Duration
	// ConfigKeys are the key paths of the all-in-one's configuration (lists' "[]" left out):
	// a code span in prose that starts with a top-level key of ConfigRoots (`audit.queue.dir`)
	// must be one of them, unless NotKeys lists it (with why).
	ConfigKeys  map[string]bool
	ConfigRoots map[string]bool
	NotKeys     map[string]string
	// FormerKeys are files that name keys of earlier versions (CHANGELOG.md): their code spans
	// are not checked as keys.
	FormerKeys map[string]bool
}

// Report is what Check found, and how much it checked (so that a check that saw nothing does
// not pass unnoticed).
type Report struct {
	// Problems are "file:line: what is wrong".
	Problems []string
	// What was checked: links (anchors among them), shell blocks and their commands, repository
	// paths they name, go run packages and the flags passed to them, blocks run, YAML blocks
	// loaded, configuration keys named in prose (NotKeysSeen of them listed in NotKeys); metric
	// names (CheckMetricNames).
	Files, Links, Anchors                       int
	ShellBlocks, Commands, Paths, GoRuns, Flags int
	RunBlocks, YAMLBlocks, ConfigKeySpans       int
	MetricNames                                 int

	NotKeysSeen map[string]bool
}

func (r *Report) problem(file string, line int, format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, args...)))
}

// checker holds what Check caches across files.
type checker struct {
	o       CheckOptions
	r       *Report
	docs    map[string]*mdDoc // by path relative to Root
	flags   map[string]map[string]bool
	readErr map[string]error
}

// Check checks the Markdown files of o: every relative link resolves to a file or folder of the
// repository and every #anchor to a heading (GitHub's slugs) or HTML anchor of its page; in
// every sh/bash/shell block the repository paths named exist (./scripts/x.sh, testdata/...,
// paths relative to a cd of the block), go run names a main package, and the flags passed to
// it are flags it defines (read from its source); blocks marked docs:run are run with bash in
// Root; YAML blocks of the kinds of o.YAML load; configuration keys named in code spans exist.
func Check(ctx context.Context, o CheckOptions) Report {
	r := Report{NotKeysSeen: map[string]bool{}}
	c := &checker{o: o, r: &r, docs: map[string]*mdDoc{}, flags: map[string]map[string]bool{}, readErr: map[string]error{}}
	for _, f := range o.Files {
		d, err := c.doc(f)
		if err != nil {
			r.problem(f, 0, "%v", err)
			continue
		}
		r.Files++
		c.checkLinks(f, d)
		c.checkKeySpans(f, d)
		for _, b := range d.blocks {
			c.checkBlock(ctx, f, b)
		}
	}
	sort.Strings(r.Problems)
	return r
}

// doc reads and parses a Markdown file of the repository.
func (c *checker) doc(rel string) (*mdDoc, error) {
	if d, ok := c.docs[rel]; ok {
		return d, nil
	}
	if err, ok := c.readErr[rel]; ok {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(c.o.Root, filepath.FromSlash(rel)))
	if err != nil {
		c.readErr[rel] = err
		return nil, err
	}
	d := parseMarkdown(string(data))
	c.docs[rel] = &d
	return &d, nil
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func (c *checker) checkLinks(file string, d *mdDoc) {
	for _, l := range d.links() {
		if scheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
			continue // absolute URL
		}
		c.r.Links++
		p, anchor, _ := strings.Cut(l.target, "#")
		p, err := url.PathUnescape(p)
		if err != nil {
			c.r.problem(file, l.line, "link %q: %v", l.target, err)
			continue
		}
		target := file
		if p != "" {
			if strings.HasPrefix(p, "/") {
				target = path.Clean(strings.TrimPrefix(p, "/"))
			} else {
				target = path.Join(path.Dir(file), p)
			}
			if target == ".." || strings.HasPrefix(target, "../") {
				c.r.problem(file, l.line, "link %q leaves the repository", l.target)
				continue
			}
			if _, err := os.Stat(filepath.Join(c.o.Root, filepath.FromSlash(target))); err != nil {
				c.r.problem(file, l.line, "link %q: %s does not exist", l.target, target)
				continue
			}
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(target, ".md") {
			continue // an anchor of another kind of file (source lines): GitHub's, not checked
		}
		c.r.Anchors++
		td, err := c.doc(target)
		if err != nil {
			c.r.problem(file, l.line, "link %q: %v", l.target, err)
			continue
		}
		if !td.anchors()[anchor] {
			c.r.problem(file, l.line, "link %q: %s has no heading or anchor #%s", l.target, target, anchor)
		}
	}
}

var (
	keySpan   = regexp.MustCompile("`([a-z][a-zA-Z0-9]*(?:\\[\\])?(?:\\.[a-z][a-zA-Z0-9]*(?:\\[\\])?)+)`")
	versionRe = regexp.MustCompile(`^v[0-9]+(?:(?:alpha|beta)[0-9]*)?$`)
	fileExts  = map[string]bool{"yaml": true, "yml": true, "json": true, "jsonl": true, "go": true, "md": true, "sh": true, "txt": true, "log": true, "gz": true, "png": true}
)

// checkKeySpans checks the configuration keys that prose names in code spans.
func (c *checker) checkKeySpans(file string, d *mdDoc) {
	if len(c.o.ConfigRoots) == 0 || c.o.FormerKeys[file] {
		return
	}
	for _, l := range d.lines {
		for _, m := range keySpan.FindAllStringSubmatch(l.text, -1) {
			span := m[1]
			segs := strings.Split(strings.ReplaceAll(span, "[]", ""), ".")
			if !c.o.ConfigRoots[segs[0]] || fileExts[segs[len(segs)-1]] {
				continue
			}
			if versionRe.MatchString(segs[len(segs)-1]) {
				continue // an API name (jaeger.storage.v2)
			}
			if _, ok := c.o.NotKeys[span]; ok {
				c.r.NotKeysSeen[span] = true
				continue
			}
			c.r.ConfigKeySpans++
			if !c.o.ConfigKeys[strings.Join(segs, ".")] {
				c.r.problem(file, l.n, "`%s` is not a configuration key (docs/reference/config.md)", span)
			}
		}
	}
}

func (c *checker) checkBlock(ctx context.Context, file string, b codeBlock) {
	switch b.info {
	case "sh", "bash", "shell":
		c.r.ShellBlocks++
		c.checkShell(file, b)
		if b.marker == MarkerRun {
			c.runBlock(ctx, file, b)
		} else if b.marker != "" {
			c.r.problem(file, b.line, "unknown marker %s on a shell block", b.marker)
		}
	case "yaml", "yml":
		c.checkYAML(file, b)
	default:
		if b.marker != "" {
			c.r.problem(file, b.line, "marker %s on a %q block", b.marker, b.info)
		}
	}
}

// firstKey is the first top-level key of a YAML document, if it starts with one.
func firstKey(body string) string {
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		if line != t || strings.HasPrefix(t, "-") {
			return ""
		}
		k, _, ok := strings.Cut(t, ":")
		if !ok {
			return ""
		}
		return strings.Trim(k, `"'`)
	}
	return ""
}

func (c *checker) checkYAML(file string, b codeBlock) {
	var kind *YAMLCheck
	for i := range c.o.YAML {
		y := &c.o.YAML[i]
		if b.marker != "" && y.Marker == b.marker || b.marker == "" && y.Match != nil && y.Match(firstKey(b.body), b.body) {
			kind = y
			break
		}
	}
	if kind == nil {
		if b.marker != "" {
			c.r.problem(file, b.line, "unknown marker %s on a YAML block", b.marker)
		}
		return
	}
	c.r.YAMLBlocks++
	if err := kind.Load([]byte(b.body + "\n")); err != nil {
		c.r.problem(file, b.line, "YAML block (%s): %v", kind.Name, err)
	}
}

// shellLine is a command line of a shell block: continued lines joined, comments dropped; n is
// the index of its first line in the block.
type shellLine struct {
	n    int
	text string
}

// shellLines returns the command lines of a shell block.
func shellLines(body string) []shellLine {
	var out []shellLine
	cur, start := "", 0
	for i, line := range strings.Split(body, "\n") {
		if cur == "" {
			start = i
		}
		line = stripComment(line)
		if t := strings.TrimRight(line, " \t"); strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		cur += line
		if strings.TrimSpace(cur) != "" {
			out = append(out, shellLine{n: start, text: cur})
		}
		cur = ""
	}
	if strings.TrimSpace(cur) != "" {
		out = append(out, shellLine{n: start, text: cur})
	}
	return out
}

// stripComment removes a shell comment: a # at the start of a word, outside quotes.
func stripComment(line string) string {
	var q byte
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case q != 0:
			if ch == q {
				q = 0
			} else if ch == '\\' && q == '"' {
				i++
			}
		case ch == '\'' || ch == '"':
			q = ch
		case ch == '\\':
			i++
		case ch == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// shellCommands splits a line into commands (at &&, ||, ;, |) of words, quotes removed; the
// parentheses of subshells and command substitutions are commands "(" and ")".
func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'' || ch == '"':
			inWord = true
			j := i + 1
			for ; j < len(line) && line[j] != ch; j++ {
				if ch == '"' && line[j] == '\\' && j+1 < len(line) {
					j++
				}
				word.WriteByte(line[j])
			}
			i = j
		case ch == '\\' && i+1 < len(line):
			inWord = true
			i++
			word.WriteByte(line[i])
		case ch == ' ' || ch == '\t':
			endWord()
		case ch == ';' || ch == '|' || ch == '&':
			endCmd()
			if i+1 < len(line) && line[i+1] == ch {
				i++
			}
		case ch == '(' || ch == ')':
			// A subshell, or a command substitution: a command of its own, between the
			// commands "(" and ")".
			endCmd()
			cmds = append(cmds, []string{string(ch)})
		default:
			inWord = true
			word.WriteByte(ch)
		}
	}
	endCmd()
	return cmds
}

var envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// outputFlags name files a command writes: they need not exist.
var outputFlags = map[string]bool{"-o": true, "--output": true, "-out": true, "--out": true}

func (c *checker) checkShell(file string, b codeBlock) {
	// The folder of the commands, relative to Root, and those of the enclosing subshells.
	cwd, outer := ".", []string(nil)
	for _, sl := range shellLines(b.body) {
		line := b.line + 1 + sl.n
		for _, words := range shellCommands(sl.text) {
			for len(words) > 0 && envAssign.MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) == 0 {
				continue
			}
			switch words[0] {
			case "(":
				outer = append(outer, cwd)
				continue
			case ")":
				if len(outer) > 0 {
					cwd, outer = outer[len(outer)-1], outer[:len(outer)-1]
				}
				continue
			}
			c.r.Commands++
			pkgArg := -1 // go run's package: checkGoRun checks it
			if len(words) > 2 && words[0] == "go" && words[1] == "run" {
				for i := 2; i < len(words); i++ {
					if !strings.HasPrefix(words[i], "-") {
						pkgArg = i
						break
					}
				}
			}
			for i, w := range words {
				if i > 0 && outputFlags[words[i-1]] || i == pkgArg {
					continue
				}
				if strings.HasPrefix(w, "-") {
					_, v, ok := strings.Cut(w, "=")
					if !ok {
						continue
					}
					w = v
				}
				c.checkPath(file, line, cwd, w, i == 0)
			}
			switch {
			case words[0] == "cd" && len(words) > 1:
				next := path.Join(cwd, words[1])
				if fi, err := os.Stat(filepath.Join(c.o.Root, filepath.FromSlash(next))); err != nil || !fi.IsDir() {
					c.r.problem(file, line, "cd %s: no such folder in the repository", words[1])
					continue
				}
				cwd = next
			case words[0] == "go" && len(words) > 2 && words[1] == "run":
				c.checkGoRun(file, line, cwd, words[2:])
			}
		}
	}
}

// checkPath checks that a word naming a repository path exists: one starting with ./ or ../, or
// a relative path whose first element exists in cwd. A command (first word) must be executable.
func (c *checker) checkPath(file string, line int, cwd, w string, command bool) {
	if w == "" || strings.ContainsAny(w, "$*{}<>?~`") || strings.Contains(w, "://") || strings.HasPrefix(w, "/") || strings.Contains(w, "...") {
		return
	}
	if !strings.HasPrefix(w, "./") && !strings.HasPrefix(w, "../") {
		first, _, ok := strings.Cut(w, "/")
		if !ok || first == "" || strings.ContainsAny(first, ":=@") {
			return
		}
		if _, err := os.Stat(filepath.Join(c.o.Root, filepath.FromSlash(cwd), first)); err != nil {
			return // not a path of the repository (or a file the command creates)
		}
	}
	rel := path.Join(cwd, w)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		c.r.problem(file, line, "%s leaves the repository", w)
		return
	}
	c.r.Paths++
	fi, err := os.Stat(filepath.Join(c.o.Root, filepath.FromSlash(rel)))
	if err != nil {
		c.r.problem(file, line, "%s: %s does not exist", w, rel)
		return
	}
	if command && (fi.IsDir() || fi.Mode()&0o111 == 0) {
		c.r.problem(file, line, "%s is not an executable file", w)
	}
}

// checkGoRun checks go run [build flags] PKG [flags]: a main package of the repository, and
// flags it defines.
func (c *checker) checkGoRun(file string, line int, cwd string, args []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i == len(args) {
		return
	}
	pkg := args[i]
	if !strings.HasPrefix(pkg, "./") && !strings.HasPrefix(pkg, "../") {
		return // a module path or files: not checked
	}
	c.r.GoRuns++
	dir := path.Join(cwd, pkg)
	flags, err := c.mainFlags(dir)
	if err != nil {
		c.r.problem(file, line, "go run %s: %v", pkg, err)
		return
	}
	for _, a := range args[i+1:] {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		c.r.Flags++
		if !flags[name] && name != "h" && name != "help" {
			c.r.problem(file, line, "go run %s: flag -%s is not defined (%s)", pkg, name, dir)
		}
	}
}

func (c *checker) mainFlags(dir string) (map[string]bool, error) {
	if f, ok := c.flags[dir]; ok {
		return f, nil
	}
	names, err := MainFlags(filepath.Join(c.o.Root, filepath.FromSlash(dir)))
	if err != nil {
		return nil, err
	}
	f := map[string]bool{}
	for _, n := range names {
		f[n] = true
	}
	c.flags[dir] = f
	return f, nil
}

// flagDefs are the flag.FlagSet and pflag.FlagSet (and package flag) functions that define a flag: the index of
// their name argument and their number of arguments.
var flagDefs = map[string][2]int{
	"String": {0, 3}, "Bool": {0, 3}, "Int": {0, 3}, "Int64": {0, 3}, "Uint": {0, 3}, "Uint64": {0, 3},
	"Float64": {0, 3}, "Duration": {0, 3}, "Func": {0, 3}, "BoolFunc": {0, 3},
	"StringVar": {1, 4}, "BoolVar": {1, 4}, "IntVar": {1, 4}, "Int64Var": {1, 4}, "UintVar": {1, 4},
	"Uint64Var": {1, 4}, "Float64Var": {1, 4}, "DurationVar": {1, 4}, "TextVar": {1, 4}, "Var": {1, 3},
	"StringArray": {0, 3}, "StringArrayVar": {1, 4}, "StringSlice": {0, 3}, "StringSliceVar": {1, 4},
}

// MainFlags returns the flags a main package defines, read from its source in dir (calls of
// flag.FlagSet methods or package flag functions with a constant name), sorted.
func MainFlags(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("no package folder: %w", err)
	}
	fset := token.NewFileSet()
	isMain := false
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "main" {
			continue
		}
		isMain = true
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			def, ok := flagDefs[sel.Sel.Name]
			if !ok || len(call.Args) != def[1] {
				return true
			}
			lit, ok := call.Args[def[0]].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if name, err := strconv.Unquote(lit.Value); err == nil && name != "" {
				seen[name] = true
			}
			return true
		})
	}
	if !isMain {
		return nil, errors.New("no main package")
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// runBlock runs a block marked docs:run with bash in Root.
func (c *checker) runBlock(ctx context.Context, file string, b codeBlock) {
	if !c.o.Run {
		return
	}
	c.r.RunBlocks++
	timeout := c.o.RunTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.body)
	cmd.Dir = c.o.Root
	setProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timeout %s)", err, timeout)
		}
		c.r.problem(file, b.line, "block marked %s failed: %v\n%s", MarkerRun, err, strings.Join(lines, "\n"))
	}
}
