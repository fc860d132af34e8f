package kelemetrix

import (
	"compress/gzip"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kelemetry/kelemetry/audit/auditlog"
)

var update = flag.Bool("update", false, "rewrite the golden files of kelemetrix/testdata")

// gunzipFixture decompresses a .gz fixture into a temporary file and returns its path.
func gunzipFixture(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, zr); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenReplay replays the recorded rollout and bulk audit logs through the default metrics
// with log replay (audit.NewReplayer into the processor), and compares the Prometheus exposition
// of the kelemetrix_ families with testdata/<fixture>.prom (go test -run TestGoldenReplay -update
// rewrites them).
func TestGoldenReplay(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"rollout", filepath.Join("..", "testdata", "rollout", "audit.jsonl")},
		{"bulk", filepath.Join("..", "testdata", "bulk", "audit.jsonl.gz")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if filepath.Ext(path) == ".gz" {
				path = gunzipFixture(t, path)
			}
			prom := newPromProvider(t)
			p, err := New(loadDefault(t), prom.settings())
			if err != nil {
				t.Fatal(err)
			}
			p.now = fixedNow(readFixture(t, path))
			ctx := context.Background()
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			r := auditlog.NewReplayer([]string{path}, "golden", -1, p, prom.settings())
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			<-r.Done()
			if _, err := r.Status(); err != nil {
				t.Fatal(err)
			}
			if err := r.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			got := prom.scrape(t, "kelemetrix_")
			golden := filepath.Join("testdata", tc.name+".prom")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("exposition differs from %s (run with -update after checking the diff):\n%s", golden, diffLines(string(want), got))
			}
		})
	}
}
