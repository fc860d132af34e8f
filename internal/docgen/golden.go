package docgen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// UpdateEnv is the environment variable that makes Golden rewrite the pages instead of comparing
// them: KELEMETRY_UPDATE_DOCS=1 go test ./internal/docgen ./cmd/kelemetry -run Reference.
const UpdateEnv = "KELEMETRY_UPDATE_DOCS"

// Golden compares the committed page at path with got, the page generated now, and fails t with
// the first differing line when they differ; with KELEMETRY_UPDATE_DOCS=1 it writes got to path.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		t.Logf("wrote %s", path)
		return
	}
	regenerate := fmt.Sprintf("%s=1 go test %s -run '^%s$'", UpdateEnv, packageArg(), t.Name())
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s does not exist: generate it with %s", path, regenerate)
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if d := FirstDiff(string(want), got); d != "" {
		t.Errorf("%s is not what the generator produces: regenerate it with %s and review the diff\n%s", path, regenerate, d)
	}
}

// packageArg is the go test argument of the package being tested (its folder relative to the
// module root, "./cmd/kelemetry"), or "." when it cannot be told.
func packageArg() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(dir) == dir {
			return "."
		}
	}
}

// FirstDiff describes the first line where the committed text differs from the generated one, or
// returns "" when they are equal.
func FirstDiff(committed, generated string) string {
	if committed == generated {
		return ""
	}
	a, b := strings.Split(committed, "\n"), strings.Split(generated, "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if i >= len(a) || i >= len(b) || la != lb {
			return fmt.Sprintf("line %d:\n  committed: %q\n  generated: %q\n(committed %d lines, generated %d)", i+1, la, lb, len(a), len(b))
		}
	}
	return "they differ" // unreachable: equal lines make equal texts
}
