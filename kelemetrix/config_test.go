package kelemetrix

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"go.yaml.in/yaml/v3"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
queueSize: 100
queueBytes: 4096
defaultTimeout: 30s
metrics:
- name: lists
  kind: histogram
  quantity: latency
  labels: [user, verb]
  buckets: [0.1, 1]
  maxSeries: 5
  stages: [ResponseComplete]
  tagFilters:
  - tag: verb
    oneOf: [list]
    regex: "w.*"
    negate: true
  quantityFilters:
  - quantity: latencyRatio
    op: ">="
    threshold: 0.5
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QueueSize != 100 || cfg.QueueBytes != 4096 || cfg.DefaultTimeout != 30*time.Second || len(cfg.Metrics) != 1 {
		t.Fatalf("parsed %+v", cfg)
	}
	m := cfg.Metrics[0]
	if m.Name != "lists" || m.Kind != kindHistogram || !slices.Equal(m.Labels, []string{"user", "verb"}) ||
		!slices.Equal(m.Buckets, []float64{0.1, 1}) || m.MaxSeries != 5 || len(m.TagFilters) != 1 ||
		!m.TagFilters[0].Negate || m.TagFilters[0].Regex != "w.*" || m.QuantityFilters[0].Threshold != 0.5 {
		t.Fatalf("parsed metric %+v", m)
	}
	if d := (Config{}).withDefaults(); d.QueueSize != defaultQueueSize || d.QueueBytes != defaultQueueBytes || d.MaxSeries != defaultMaxSeries || d.DefaultTimeout != defaultRequestTimeout {
		t.Errorf("defaults %+v", d)
	}
}

// TestConfigErrorsNameTheLine: unknown keys, wrong types, bad regexes and invalid values are
// errors that name their line.
func TestConfigErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"unknown top key", "metric:\n- name: a\n", "line 1: unknown key \"metric\""},
		{"unknown metric key", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  lables: [user]\n", "line 5: unknown key \"lables\""},
		{"unknown filter key", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  tagFilters:\n  - tag: verb\n    one_of: [get]\n", "line 7: unknown key \"one_of\""},
		{"bad regex", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  tagFilters:\n  - tag: verb\n    regex: \"(get\"\n", "line 7: kelemetrix metrics[0]: tag filter on \"verb\": regex"},
		{"bad regex, filter on one line", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  tagFilters:\n  - {tag: verb, oneOf: [get]}\n  - {tag: user, regex: \"[\"}\n", "line 7: kelemetrix metrics[0]: tag filter on \"user\": regex"},
		{"unknown tag in a block list", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  labels:\n  - user\n  - verb\n  - usr\n", "line 8: kelemetrix metrics[0]: label \"usr\" is no tag"},
		{"label listed twice", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  labels:\n  - user\n  - user\n", "line 7: kelemetrix metrics[0]: label \"user\" is listed twice"},
		{"unknown stage in a block list", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  stages:\n  - ResponseComplete\n  - Done\n", "line 7: kelemetrix metrics[0]: stage \"Done\""},
		{"unknown filter tag", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  tagFilters:\n  - oneOf: [get]\n    tag: vrb\n", "line 7: kelemetrix metrics[0]: tag filter: tag \"vrb\""},
		{"negative queueBytes", "queueBytes: -5\n", "line 1: kelemetrix queueBytes -5 is negative"},
		{"negative queueSize", "maxSeries: 5\nqueueSize: -1\n", "line 2: kelemetrix queueSize -1 is negative"},
		{"negative metric maxSeries", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  maxSeries: -2\n", "line 5: kelemetrix metrics[0]: maxSeries -2 is negative"},
		{"wrong type", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  maxSeries: many\n", "line 5:"},
		{"unknown tag", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  labels: [usr]\n", "line 5: kelemetrix metrics[0]: label \"usr\" is no tag"},
		{"unknown quantity", "metrics:\n- name: a\n  kind: counter\n  quantity: requests\n", "line 4: kelemetrix metrics[0]: quantity \"requests\""},
		{"unknown kind", "metrics:\n- name: a\n  kind: gauge\n  quantity: requestCount\n", "line 3: kelemetrix metrics[0]: kind \"gauge\""},
		{"bad op", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  quantityFilters:\n  - quantity: latency\n    op: \"=\"\n", "line 7: kelemetrix metrics[0]: quantity filter on \"latency\": op \"=\""},
		{"duplicate name", "metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n- name: a\n  kind: counter\n  quantity: requestCount\n", "line 5: kelemetrix metrics[1]: name \"a\" is defined twice"},
		{"bad name", "metrics:\n- name: a-b\n  kind: counter\n  quantity: requestCount\n", "line 2: kelemetrix metrics[0]: name \"a-b\""},
		{"buckets not increasing", "metrics:\n- name: a\n  kind: histogram\n  quantity: latency\n  buckets: [1, 0.5]\n", "line 5: kelemetrix metrics[0]: buckets [1 0.5] are not increasing"},
		{"buckets on a counter", "metrics:\n- name: a\n  kind: counter\n  quantity: latency\n  buckets: [1]\n", "line 5: kelemetrix metrics[0]: buckets are for histograms only"},
		{"filter without choices", "metrics:\n- name: a\n  kind: counter\n  quantity: latency\n  tagFilters:\n  - tag: verb\n", "line 6: kelemetrix metrics[0]: tag filter on \"verb\": needs oneOf or regex"},
		{"unknown stage", "metrics:\n- name: a\n  kind: counter\n  quantity: latency\n  stages: [Done]\n", "line 5: kelemetrix metrics[0]: stage \"Done\""},
		{"duplicate key", "metrics:\n- name: a\n  name: b\n", "line 3: key \"name\" given twice"},
		{"not a mapping", "metrics:\n- [a]\n", "line 2: want a mapping"},
		{"not a list", "metrics: a\n", "line 1: want a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestConfigInsideAnotherFile: under a key of a larger YAML file (the all-in-one's kelemetrix:),
// the lines are those of that file.
func TestConfigInsideAnotherFile(t *testing.T) {
	var outer struct {
		Cluster    string `yaml:"cluster"`
		Kelemetrix Config `yaml:"kelemetrix"`
	}
	err := yaml.Unmarshal([]byte("cluster: a\nkelemetrix:\n  metrics:\n  - name: a\n    kind: counter\n    quantity: requestCount\n    labelz: [user]\n"), &outer)
	if err == nil || !strings.Contains(err.Error(), "line 7: unknown key \"labelz\"") {
		t.Fatalf("error %v, want line 7", err)
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := loadDefault(t)
	var requests *MetricConfig
	for i, m := range cfg.Metrics {
		if m.Name == "kelemetrix_requests" {
			requests = &cfg.Metrics[i]
		}
	}
	if requests == nil || requests.Kind != kindCounter || requests.Quantity != quantityRequestCount {
		t.Fatal("the default config has no kelemetrix_requests request counter")
	}
	for _, l := range []string{tagUser, tagVerb, tagResource, tagSubresource} {
		if !slices.Contains(requests.Labels, l) {
			t.Errorf("kelemetrix_requests is not labelled by %s", l)
		}
	}
}

// TestExportedNames: ExportedName is the family name the Prometheus exposition shows, for each
// kind and quantity.
func TestExportedNames(t *testing.T) {
	var cfg Config
	for _, q := range quantityNames() {
		cfg.Metrics = append(cfg.Metrics,
			MetricConfig{Name: "x_" + q + "_c", Kind: kindCounter, Quantity: q},
			MetricConfig{Name: "x_" + q + "_h", Kind: kindHistogram, Quantity: q})
	}
	cfg.Metrics = append(cfg.Metrics, MetricConfig{Name: "x_already_seconds", Kind: kindHistogram, Quantity: quantityLatency},
		MetricConfig{Name: "x_already_total", Kind: kindCounter, Quantity: quantityRequestCount})
	prom := newPromProvider(t)
	p, err := New(cfg, prom.settings())
	if err != nil {
		t.Fatal(err)
	}
	ev := req("a", "get", "pods", 200, time.Second)
	ev.RequestObject, ev.ResponseObject = []byte(`{}`), []byte(`{}`)
	p.now = func() time.Time { return t0.Add(time.Hour) }
	p.Handle(context.Background(), "c", []*auditv1.Event{ev})
	want := cfg.exportedNames()
	slices.Sort(want)
	if got := prom.families(t, "x_"); !slices.Equal(got, want) {
		t.Errorf("exposition families %v, ExportedNames %v", got, want)
	}
}

func TestMerge(t *testing.T) {
	a := Config{QueueSize: 5, MaxSeries: 7, Metrics: []MetricConfig{counter("a")}}
	b := Config{MaxSeries: 9, QueueBytes: 10, DefaultTimeout: time.Second, Metrics: []MetricConfig{counter("b")}}
	m := a.Merge(b)
	if m.QueueSize != 5 || m.QueueBytes != 10 || m.MaxSeries != 9 || m.DefaultTimeout != time.Second || len(m.Metrics) != 2 || m.Metrics[1].Name != "b" {
		t.Errorf("merged %+v", m)
	}
	if len(a.Metrics) != 1 {
		t.Error("Merge changed its receiver")
	}
	if err := m.Merge(b).Validate(); err == nil || !strings.Contains(err.Error(), `"b" is defined twice`) {
		t.Errorf("twice merged: %v", err)
	}
}
