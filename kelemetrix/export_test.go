package kelemetrix

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// promProvider is a meter provider exported to a registry of its own, as /metrics serves it.
type promProvider struct {
	reg      *prometheus.Registry
	provider *sdkmetric.MeterProvider
}

func newPromProvider(t testing.TB) *promProvider {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &promProvider{reg: reg, provider: mp}
}

func (p *promProvider) settings() telemetry.Settings {
	return telemetry.Settings{MeterProvider: p.provider}
}

// scrape returns the text exposition of the families whose name starts with prefix.
func (p *promProvider) scrape(t testing.TB, prefix string) string {
	t.Helper()
	fams, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// families returns the names of the families whose name starts with prefix.
func (p *promProvider) families(t testing.TB, prefix string) []string {
	t.Helper()
	fams, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), prefix) {
			names = append(names, f.GetName())
		}
	}
	sort.Strings(names)
	return names
}

// loadDefault reads deploy/kelemetrix.yaml.
func loadDefault(t testing.TB) Config {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("..", "deploy", "kelemetrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// readFixture decodes a recorded audit log (JSON lines, one event a line).
func readFixture(t testing.TB, path string) []*auditv1.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []*auditv1.Event
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := auditv1.DecodeEvent(line)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		events = append(events, ev)
	}
	return events
}

// fixedNow is the clock of golden tests: a minute after the last event of the fixtures.
func fixedNow(events []*auditv1.Event) func() time.Time {
	var last time.Time
	for _, ev := range events {
		if ev.StageTimestamp.After(last) {
			last = ev.StageTimestamp
		}
	}
	return func() time.Time { return last.Add(time.Minute) }
}

// diffLines lists the lines only in want (-) and only in got (+).
func diffLines(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// The tag "cluster" was renamed "clusterName": a config that still says cluster (as a label or
// in a tag filter) works, exports the label clusterName, and is warned about once.
func TestRenamedClusterTag(t *testing.T) {
	cfg, err := ParseConfig([]byte(`metrics:
- name: kelemetrix_requests
  kind: counter
  quantity: requestCount
  labels: [cluster, verb]
  tagFilters:
  - {tag: cluster, oneOf: [c]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := (Config{Metrics: []MetricConfig{{Name: "a", Kind: kindCounter, Quantity: "requestCount", Labels: []string{"cluster", "clusterName"}}}}).Validate(); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("cluster and clusterName together: %v, want listed twice", err)
	}
	prom := newPromProvider(t)
	logs := &logtest.Recorder{}
	ts := prom.settings()
	ts.Logger = slog.New(logs)
	p, err := New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	p.Handle(context.Background(), "c", readFixture(t, filepath.Join("..", "testdata", "rollout", "audit.jsonl")))
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := prom.scrape(t, "kelemetrix_requests_total")
	if !strings.Contains(got, `clusterName="c"`) || strings.Contains(got, `cluster="c"`) {
		t.Errorf("exposition:\n%s\nwant the label clusterName", got)
	}
	if n := logs.Count(slog.LevelWarn); n != 1 {
		t.Errorf("%d warnings, want 1 (the renamed tag): %v", n, logs.Records())
	}
}
