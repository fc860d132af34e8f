package docgen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// FlagDoc is what a command-line reference says of a flag beyond its pflag.FlagSet entry.
type FlagDoc struct {
	// Arg names the flag's value (FILE, NAME=FILE); empty: the type from pflag.UnquoteUsage
	// (string, duration, int, float64; nothing for a bool). A flag of another type (a repeatable
	// stringArray, a pflag.Value of its own) needs one.
	Arg string
	// YAML is the key of the same setting in the configuration file (config.md), if any.
	YAML string
	// More is Markdown added after the usage string.
	More string
}

// FlagsTable renders the flags of fs, in order of name, as a Markdown table: the flag and its
// value, its default (left empty when it is the type's zero value), the YAML key of docs (linked
// to the configuration reference) and the usage string followed by the doc's More (after a
// period). It fails when
// docs names a flag that fs does not define, or a flag of a type of its own has no Arg.
func FlagsTable(fs *pflag.FlagSet, docs map[string]FlagDoc) (string, error) {
	var errs []string
	for name := range docs {
		if fs.Lookup(name) == nil {
			errs = append(errs, fmt.Sprintf("--%s is documented but not defined", name))
		}
	}
	var rows [][]string
	fs.VisitAll(func(f *pflag.Flag) {
		d := docs[f.Name]
		arg, usage := pflag.UnquoteUsage(f)
		if d.Arg != "" {
			arg = d.Arg
		} else if !plainTypes[arg] && !strings.Contains(f.Usage, "`") {
			errs = append(errs, fmt.Sprintf("--%s: a flag of type %s needs FlagDoc.Arg", f.Name, arg))
		}
		if arg == "" {
			arg = "bool"
		}
		def := f.DefValue
		if arg == "" || arg == "bool" {
			def = strings.TrimSuffix(def, "false")
		}
		switch def {
		case "", "0", "0s", "false", "[]":
			def = ""
		}
		yaml := ""
		if d.YAML != "" {
			yaml = "[" + Code(d.YAML) + "](" + ConfigKeyLink(d.YAML) + ")"
		}
		desc := Cell(usage)
		if d.More != "" {
			if !strings.HasSuffix(desc, ".") {
				desc += "."
			}
			desc += " " + d.More
		}
		rows = append(rows, []string{Code("--" + f.Name), Cell(arg), Code(def), yaml, desc})
	})
	sort.Slice(rows, func(i, j int) bool { return strings.Trim(rows[i][0], "`") < strings.Trim(rows[j][0], "`") })
	if len(errs) > 0 {
		sort.Strings(errs)
		return "", fmt.Errorf("flags: %s", strings.Join(errs, "; "))
	}
	return Table([]string{"flag", "value", "default", "YAML key", "description"}, rows), nil
}

// ConfigKeyLink is the link from a page of docs/reference to the row of a key in the
// configuration reference: the section of its top-level key, or the table of top-level keys.
func ConfigKeyLink(key string) string {
	i := strings.IndexAny(key, ".[")
	if i < 0 {
		return "config.md#top-level-keys"
	}
	return "config.md#" + Slug(key[:i])
}

// plainTypes are the value types a reference can name as they are.
var plainTypes = map[string]bool{"": true, "string": true, "int": true, "int64": true, "uint": true, "uint64": true, "float": true, "float64": true, "duration": true}

// FlagNames returns the names of the flags of fs, sorted.
func FlagNames(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
	sort.Strings(out)
	return out
}
