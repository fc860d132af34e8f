package kelemetrix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Kinds of MetricConfig.Kind.
const (
	// kindCounter adds the quantity to a counter (a request count counts requests).
	kindCounter = "counter"
	// kindHistogram records the quantity in a histogram with MetricConfig.Buckets.
	kindHistogram = "histogram"
)

// Defaults of Config.
const (
	defaultQueueSize      = 65536
	defaultQueueBytes     = 256 << 20
	defaultMaxSeries      = 1000
	defaultRequestTimeout = 60 * time.Second
)

// otherValue is the value of every label of the series that the label sets over a metric's
// cardinality cap are folded into.
const otherValue = "other"

// Config defines the metrics. The zero value defines none: the processor then does nothing.
type Config struct {
	// Metrics are the metrics to record from each audit event.
	Metrics []MetricConfig `yaml:"metrics"`
	// QueueSize bounds the audit events waiting to be turned into metric points (default 65536).
	// When it is full, an observed batch is dropped and counted
	// (kelemetry_kelemetrix_dropped_events_total); the webhook of a standalone processor answers
	// 429.
	QueueSize int `yaml:"queueSize"`
	// QueueBytes bounds the estimated memory (auditv1.EventBytes: the request and response bodies
	// plus 1 KiB an event) of the events waiting (default 256 MiB). A batch over it is dropped
	// and counted like one over QueueSize, with reason queue_bytes; a batch larger than
	// QueueBytes is still taken when nothing waits, so that it is never refused for ever.
	QueueBytes int64 `yaml:"queueBytes"`
	// MaxSeries is the default cap of a metric's series (default 1000): at most MaxSeries-1 label
	// sets, then one series whose labels are all "other" (see MetricConfig.MaxSeries).
	MaxSeries int `yaml:"maxSeries"`
	// DefaultTimeout is the timeout of a request whose URI names none (the latencyRatio
	// quantity), like kube-apiserver's --request-timeout (default 60s).
	DefaultTimeout time.Duration `yaml:"defaultTimeout"`

	lines keyLines
}

// MetricConfig defines one metric.
type MetricConfig struct {
	// Name is the metric's name, [a-zA-Z_][a-zA-Z0-9_]*. The Prometheus exposition adds the unit
	// of the quantity and _total to counters (see ExportedName).
	Name string `yaml:"name"`
	// Help is the metric's description.
	Help string `yaml:"help"`
	// Kind is "counter" or "histogram".
	Kind string `yaml:"kind"`
	// Quantity is what is recorded: requestCount (1 per request), latency (seconds from
	// requestReceivedTimestamp to stageTimestamp), latencyRatio (latency divided by the request's
	// timeout), requestSize and responseSize (bytes of the request and response objects, at the
	// Request and RequestResponse audit levels only), deliveryDelay (seconds from stageTimestamp
	// to processing). An event without the quantity (no object body) does not update the metric.
	Quantity string `yaml:"quantity"`
	// Labels are the tags the metric is labelled by (see Tags).
	Labels []string `yaml:"labels"`
	// Stages are the audit stages counted (default ResponseComplete and Panic: one event per
	// finished request).
	Stages []string `yaml:"stages"`
	// Buckets are a histogram's bucket boundaries, increasing (default: by quantity).
	Buckets []float64 `yaml:"buckets"`
	// MaxSeries caps the metric's series, the "other" one included (default Config.MaxSeries):
	// the first MaxSeries-1 label sets seen get a series each, later ones are folded into the
	// other series and counted (kelemetry_kelemetrix_series_overflow_total). The meter provider of
	// telemetry.Module keeps that many series (see CardinalityLimit); a provider of one's own
	// needs sdkmetric.WithCardinalityLimit(int(cfg.CardinalityLimit())) or more, else the SDK
	// folds series itself into otel_metric_overflow="true".
	MaxSeries int `yaml:"maxSeries"`
	// TagFilters must all pass for an event to count.
	TagFilters []tagFilter `yaml:"tagFilters"`
	// QuantityFilters must all pass for an event to count.
	QuantityFilters []quantityFilter `yaml:"quantityFilters"`

	line       int      // of the metric's list item
	lines      keyLines // of its keys
	labelLines []int    // of each label
	stageLines []int    // of each stage
}

// keyLines are the lines of a parsed mapping's keys (nil when not parsed from YAML).
type keyLines map[string]int

// of returns the line of key, else fallback.
func (l keyLines) of(key string, fallback int) int {
	if n := l[key]; n > 0 {
		return n
	}
	return fallback
}

// itemLine returns lines[i], else fallback.
func itemLine(lines []int, i, fallback int) int {
	if i < len(lines) && lines[i] > 0 {
		return lines[i]
	}
	return fallback
}

// tagFilter passes an event whose tag is one of OneOf or matches Regex (the whole value); Negate
// inverts it.
type tagFilter struct {
	// Tag is the tag compared (see Tags).
	Tag string `yaml:"tag"`
	// OneOf lists the values that pass.
	OneOf []string `yaml:"oneOf"`
	// Regex is an RE2 expression the whole value must match to pass.
	Regex string `yaml:"regex"`
	// Negate passes what would not pass, and the reverse.
	Negate bool `yaml:"negate"`

	line  int
	lines keyLines
}

// quantityFilter passes an event whose quantity compares with Threshold as Op says. An event
// without the quantity does not pass.
type quantityFilter struct {
	// Quantity is the quantity compared (see MetricConfig.Quantity).
	Quantity string `yaml:"quantity"`
	// Op is <, >, <= or >=.
	Op string `yaml:"op"`
	// Threshold is what the quantity is compared with (seconds, bytes, a ratio or 1).
	Threshold float64 `yaml:"threshold"`

	line  int
	lines keyLines
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.QueueSize == 0 {
		c.QueueSize = defaultQueueSize
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = defaultQueueBytes
	}
	if c.MaxSeries == 0 {
		c.MaxSeries = defaultMaxSeries
	}
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = defaultRequestTimeout
	}
	return c
}

var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate reports a configuration that cannot work; errors of a parsed configuration name the
// line of the value at fault (the key's line, or the list item's for a label or a stage).
func (c Config) Validate() error {
	var errs []error
	top := func(key, format string, args ...any) {
		if line := c.lines.of(key, 0); line > 0 {
			format = "line " + strconv.Itoa(line) + ": " + format
		}
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if c.QueueSize < 0 {
		top("queueSize", "kelemetrix queueSize %d is negative", c.QueueSize)
	}
	if c.QueueBytes < 0 {
		top("queueBytes", "kelemetrix queueBytes %d is negative", c.QueueBytes)
	}
	if c.MaxSeries < 0 {
		top("maxSeries", "kelemetrix maxSeries %d is negative", c.MaxSeries)
	}
	if c.DefaultTimeout < 0 {
		top("defaultTimeout", "kelemetrix defaultTimeout %s is negative", c.DefaultTimeout)
	}
	names := map[string]bool{}
	for i, m := range c.Metrics {
		at := func(line int, format string, args ...any) {
			where := "kelemetrix metrics[" + strconv.Itoa(i) + "]"
			if line > 0 {
				where = "line " + strconv.Itoa(line) + ": " + where
			}
			errs = append(errs, fmt.Errorf(where+": "+format, args...))
		}
		key := func(k string) int { return m.lines.of(k, m.line) }
		if !metricName.MatchString(m.Name) {
			at(key("name"), "name %q: want [a-zA-Z_][a-zA-Z0-9_]*", m.Name)
		} else if names[m.Name] {
			at(key("name"), "name %q is defined twice", m.Name)
		}
		names[m.Name] = true
		switch m.Kind {
		case kindCounter, kindHistogram:
		default:
			at(key("kind"), "kind %q: want %q or %q", m.Kind, kindCounter, kindHistogram)
		}
		if _, ok := quantityByName(m.Quantity); !ok {
			at(key("quantity"), "quantity %q: want one of %v", m.Quantity, quantityNames())
		}
		if len(m.Buckets) > 0 && m.Kind != kindHistogram {
			at(key("buckets"), "buckets are for histograms only")
		}
		if !slices.IsSorted(m.Buckets) || len(slices.Compact(slices.Clone(m.Buckets))) != len(m.Buckets) {
			at(key("buckets"), "buckets %v are not increasing", m.Buckets)
		}
		if m.MaxSeries < 0 {
			at(key("maxSeries"), "maxSeries %d is negative", m.MaxSeries)
		}
		seen := map[tagID]bool{}
		for j, l := range m.Labels {
			line := itemLine(m.labelLines, j, key("labels"))
			if id, ok := tagByName(l); !ok {
				at(line, "label %q is no tag: want one of %v", l, tagNames())
			} else if seen[id] {
				at(line, "label %q is listed twice", l)
			} else {
				seen[id] = true
			}
		}
		for j, s := range m.Stages {
			if !slices.Contains(stages, s) {
				at(itemLine(m.stageLines, j, key("stages")), "stage %q: want one of %v", s, stages)
			}
		}
		for _, f := range m.TagFilters {
			if _, ok := tagByName(f.Tag); !ok {
				at(f.lines.of("tag", f.line), "tag filter: tag %q: want one of %v", f.Tag, tagNames())
			}
			if len(f.OneOf) == 0 && f.Regex == "" {
				at(f.line, "tag filter on %q: needs oneOf or regex", f.Tag)
			}
			if f.Regex != "" {
				if _, err := compileFull(f.Regex); err != nil {
					at(f.lines.of("regex", f.line), "tag filter on %q: regex: %w", f.Tag, err)
				}
			}
		}
		for _, f := range m.QuantityFilters {
			if _, ok := quantityByName(f.Quantity); !ok {
				at(f.lines.of("quantity", f.line), "quantity filter: quantity %q: want one of %v", f.Quantity, quantityNames())
			}
			if _, ok := parseOp(f.Op); !ok {
				at(f.lines.of("op", f.line), "quantity filter on %q: op %q: want <, >, <= or >=", f.Quantity, f.Op)
			}
		}
	}
	return errors.Join(errs...)
}

// CardinalityLimit returns the OpenTelemetry SDK cardinality limit that keeps every series of c's
// metrics: the largest maxSeries plus one (the SDK's limit counts its own overflow series); zero
// without metrics.
func (c Config) CardinalityLimit() telemetry.CardinalityLimit {
	if len(c.Metrics) == 0 {
		return 0
	}
	c = c.withDefaults()
	largest := c.MaxSeries
	for _, m := range c.Metrics {
		largest = max(largest, m.MaxSeries)
	}
	return telemetry.CardinalityLimit(largest + 1)
}

// compileFull compiles an expression that must match a whole value.
func compileFull(expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return re, nil
}

// stages are the audit stages of k8s.io/apiserver/pkg/apis/audit/v1.
var stages = []string{"RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"}

// LoadConfig reads a kelemetrix configuration file (the value of the all-in-one's kelemetrix
// key: metrics, queueSize, ...). Unknown keys and invalid values are errors naming the file and
// line.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read kelemetrix config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates a kelemetrix configuration in YAML. Unknown keys, values of
// the wrong type, bad regexes and the other errors of Validate name their line.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("parse kelemetrix config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// UnmarshalYAML decodes c strictly from node: unknown keys are errors with their line, and the
// lines of metrics and filters are kept for the errors of Validate.
func (c *Config) UnmarshalYAML(node *yaml.Node) error {
	out := Config{lines: keyLines{}}
	err := decodeMap(node, out.lines, map[string]func(*yaml.Node) error{
		"metrics": func(n *yaml.Node) error {
			return decodeList(n, func(item *yaml.Node) error {
				m, err := decodeMetric(item)
				out.Metrics = append(out.Metrics, m)
				return err
			})
		},
		"queueSize":      scalar(&out.QueueSize),
		"queueBytes":     scalar(&out.QueueBytes),
		"maxSeries":      scalar(&out.MaxSeries),
		"defaultTimeout": scalar(&out.DefaultTimeout),
	})
	if err != nil {
		return err
	}
	*c = out
	return nil
}

func decodeMetric(node *yaml.Node) (MetricConfig, error) {
	m := MetricConfig{line: node.Line, lines: keyLines{}}
	err := decodeMap(node, m.lines, map[string]func(*yaml.Node) error{
		"name":      scalar(&m.Name),
		"help":      scalar(&m.Help),
		"kind":      scalar(&m.Kind),
		"quantity":  scalar(&m.Quantity),
		"labels":    list(&m.Labels, &m.labelLines),
		"stages":    list(&m.Stages, &m.stageLines),
		"buckets":   scalar(&m.Buckets),
		"maxSeries": scalar(&m.MaxSeries),
		"tagFilters": func(n *yaml.Node) error {
			return decodeList(n, func(item *yaml.Node) error {
				f := tagFilter{line: item.Line, lines: keyLines{}}
				err := decodeMap(item, f.lines, map[string]func(*yaml.Node) error{
					"tag":    scalar(&f.Tag),
					"oneOf":  scalar(&f.OneOf),
					"regex":  scalar(&f.Regex),
					"negate": scalar(&f.Negate),
				})
				m.TagFilters = append(m.TagFilters, f)
				return err
			})
		},
		"quantityFilters": func(n *yaml.Node) error {
			return decodeList(n, func(item *yaml.Node) error {
				f := quantityFilter{line: item.Line, lines: keyLines{}}
				err := decodeMap(item, f.lines, map[string]func(*yaml.Node) error{
					"quantity":  scalar(&f.Quantity),
					"op":        scalar(&f.Op),
					"threshold": scalar(&f.Threshold),
				})
				m.QuantityFilters = append(m.QuantityFilters, f)
				return err
			})
		},
	})
	return m, err
}

// decodeMap calls the field's function for each key of the mapping node, recording the key's line
// in lines; an unknown key is an error with its line.
func decodeMap(node *yaml.Node, lines keyLines, fields map[string]func(*yaml.Node) error) error {
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping", node.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		f, ok := fields[k.Value]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			slices.Sort(known)
			return fmt.Errorf("line %d: unknown key %q (want one of %v)", k.Line, k.Value, known)
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: key %q given twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		if lines != nil {
			lines[k.Value] = k.Line
		}
		if err := f(v); err != nil {
			return err
		}
	}
	return nil
}

// decodeList calls item for each element of a sequence node.
func decodeList(node *yaml.Node, item func(*yaml.Node) error) error {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	if node.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: want a list", node.Line)
	}
	for _, n := range node.Content {
		if err := item(n); err != nil {
			return err
		}
	}
	return nil
}

// list decodes a list of scalars into v and the line of each item into lines.
func list(v *[]string, lines *[]int) func(*yaml.Node) error {
	return func(n *yaml.Node) error {
		if err := scalar(v)(n); err != nil {
			return err
		}
		*lines = (*lines)[:0]
		if n.Kind == yaml.SequenceNode {
			for _, item := range n.Content {
				*lines = append(*lines, item.Line)
			}
		}
		return nil
	}
}

// scalar decodes a value (a scalar or a list of scalars) into v, with the line in its error.
func scalar[T any](v *T) func(*yaml.Node) error {
	return func(n *yaml.Node) error {
		if n.Kind == yaml.MappingNode {
			return fmt.Errorf("line %d: want a value, not a mapping", n.Line)
		}
		if err := n.Decode(v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		return nil
	}
}

// renamedTagsUsed maps each former tag name (renamedTags) the metrics use, as a label or in a
// tag filter, to its new name.
func (c Config) renamedTagsUsed() map[string]string {
	used := map[string]string{}
	for _, m := range c.Metrics {
		names := slices.Clone(m.Labels)
		for _, f := range m.TagFilters {
			names = append(names, f.Tag)
		}
		for _, n := range names {
			if now, ok := renamedTags[n]; ok {
				used[n] = now
			}
		}
	}
	return used
}

// ExportedName is the name of m's family in the Prometheus exposition of /metrics: the name, then
// the unit of its quantity (_seconds, _bytes) unless the name ends with it, then _total for a
// counter. A histogram's series are that name plus _bucket, _sum and _count.
func ExportedName(m MetricConfig) string {
	name := m.Name
	if id, ok := quantityByName(m.Quantity); ok {
		suffix := ""
		switch quantities[id].unit {
		case "s":
			suffix = "_seconds"
		case "By":
			suffix = "_bytes"
		}
		if suffix != "" && !strings.HasSuffix(name, suffix) {
			name += suffix
		}
	}
	if m.Kind == kindCounter && !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	return name
}

// exportedNames returns ExportedName of each of c's metrics, in order.
func (c Config) exportedNames() []string {
	names := make([]string, len(c.Metrics))
	for i, m := range c.Metrics {
		names[i] = ExportedName(m)
	}
	return names
}

// Merge returns c with the metrics of o added after its own, and o's non-zero settings
// (queueSize, queueBytes, maxSeries, defaultTimeout) replacing c's. The result may define a metric twice:
// Validate says so.
func (c Config) Merge(o Config) Config {
	c.Metrics = append(slices.Clip(c.Metrics), o.Metrics...)
	c.lines = nil // the settings may come from either file: their lines would mislead
	if o.QueueSize != 0 {
		c.QueueSize = o.QueueSize
	}
	if o.QueueBytes != 0 {
		c.QueueBytes = o.QueueBytes
	}
	if o.MaxSeries != 0 {
		c.MaxSeries = o.MaxSeries
	}
	if o.DefaultTimeout != 0 {
		c.DefaultTimeout = o.DefaultTimeout
	}
	return c
}
