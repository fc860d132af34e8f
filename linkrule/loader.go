package linkrule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// maxRuleFileSize bounds one rule file.
const maxRuleFileSize = 4 << 20

// ParseRules reads LinkRule documents from YAML (several separated by ---) or JSON. Empty
// documents are skipped; unknown fields, other kinds and other API versions are errors.
func ParseRules(r io.Reader) ([]LinkRule, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []LinkRule
	for i := 0; ; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("document %d: %w", i+1, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var lr LinkRule
		jd := json.NewDecoder(bytes.NewReader(raw))
		jd.DisallowUnknownFields()
		if err := jd.Decode(&lr); err != nil {
			return out, fmt.Errorf("document %d: %w", i+1, err)
		}
		if lr.APIVersion != APIVersion || lr.Kind != Kind {
			return out, fmt.Errorf("document %d: apiVersion %q kind %q, want %s %s", i+1, lr.APIVersion, lr.Kind, APIVersion, Kind)
		}
		out = append(out, lr)
	}
}

// RuleFile is a rule read from a file.
type RuleFile struct {
	Path string
	Rule LinkRule
}

// LoadDir reads every *.yaml, *.yml and *.json file of dir (not its subfolders), in name order.
// A file that cannot be read or parsed is reported in errs and skipped; the others are returned.
// A missing or unreadable dir is err.
func LoadDir(dir string) (rules []RuleFile, errs []error, err error) {
	files, err := ruleFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		data, err := readLimited(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lrs, err := ParseRules(bytes.NewReader(data))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		for _, lr := range lrs {
			rules = append(rules, RuleFile{Path: f, Rule: lr})
		}
	}
	return rules, errs, nil
}

func ruleFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("link rules dir: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
			files = append(files, filepath.Join(dir, name))
		}
	}
	slices.Sort(files)
	return files, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRuleFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxRuleFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxRuleFileSize)
	}
	return data, nil
}

// dirSignature fingerprints the rule files of dir (names, sizes, modification times), so that a
// reload happens only when something changed.
func dirSignature(dir string) (string, error) {
	files, err := ruleFiles(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\n", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}
