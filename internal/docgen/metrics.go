package docgen

import (
	"context"
	"fmt"
	"go/ast"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Metric is an instrument the code registers by a literal name.
type Metric struct {
	// Name is the OpenTelemetry instrument name; Prometheus the name of its family on /metrics
	// (from the project's Prometheus exporter).
	Name, Prometheus string
	// Kind is counter, updowncounter, gauge or histogram.
	Kind        string
	Description string
	Unit        string
	// Packages are the folders (relative to the module root) of the packages that register it.
	Packages []string
}

// The methods that create instruments: those of instrument.Meter (name, description, unit, ...)
// and those of the OpenTelemetry metric.Meter (name, options...).
var (
	meterKinds = map[string]string{
		"Counter": "counter", "FloatCounter": "counter", "FixedCounter": "counter",
		"UpDownCounter": "updowncounter", "Gauge": "gauge", "Histogram": "histogram",
	}
	otelKinds = map[string]string{
		"Int64Counter": "counter", "Float64Counter": "counter",
		"Int64ObservableCounter": "counter", "Float64ObservableCounter": "counter",
		"Int64UpDownCounter": "updowncounter", "Float64UpDownCounter": "updowncounter",
		"Int64ObservableUpDownCounter": "updowncounter", "Float64ObservableUpDownCounter": "updowncounter",
		"Int64Gauge": "gauge", "Float64Gauge": "gauge",
		"Int64ObservableGauge": "gauge", "Float64ObservableGauge": "gauge",
		"Int64Histogram": "histogram", "Float64Histogram": "histogram",
	}
)

// Metrics returns the instruments the module's packages create with a constant name, one per
// name, kind, description and unit (a call that gives no description is left out when another
// gives one), sorted by name; and the positions ("dir/file.go:line") of the calls whose name is
// not a constant (wrappers, metrics defined by configuration), which it cannot document.
func (m *Module) Metrics() ([]Metric, []string, error) {
	byKey := map[string]*Metric{}
	var dynamic []string
	for _, path := range m.Packages() {
		pkg := m.pkgs[path]
		if path == m.Path+"/internal/docgen" {
			continue // this package: it creates instruments to learn their Prometheus names
		}
		for _, f := range pkg.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				var mt Metric
				if kind, ok := meterKinds[sel.Sel.Name]; ok && len(call.Args) >= 3 {
					mt.Kind = kind
					desc, ok1 := stringConst(call.Args[1])
					unit, ok2 := stringConst(call.Args[2])
					mt.Description, mt.Unit = desc, unit
					if !ok1 || !ok2 {
						mt.Description = "?"
					}
				} else if kind, ok := otelKinds[sel.Sel.Name]; ok {
					mt.Kind = kind
					for _, a := range call.Args[1:] {
						opt, ok := a.(*ast.CallExpr)
						if !ok || len(opt.Args) != 1 {
							continue
						}
						if s, ok := opt.Fun.(*ast.SelectorExpr); ok {
							v, _ := stringConst(opt.Args[0])
							switch s.Sel.Name {
							case "WithDescription":
								mt.Description = v
							case "WithUnit":
								mt.Unit = v
							}
						}
					}
				} else {
					return true
				}
				name, ok := stringConst(call.Args[0])
				if !ok {
					pos := m.Fset.Position(call.Pos())
					rel, _ := filepath.Rel(m.Root, pos.Filename)
					dynamic = append(dynamic, fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line))
					return true
				}
				mt.Name = name
				key := strings.Join([]string{mt.Name, mt.Kind, mt.Description, mt.Unit}, "\x00")
				e, ok := byKey[key]
				if !ok {
					e = &mt
					byKey[key] = e
				}
				if !contains(e.Packages, pkg.dir) {
					e.Packages = append(e.Packages, pkg.dir)
				}
				return true
			})
		}
	}
	described := map[string]bool{}
	for _, e := range byKey {
		if e.Description != "" {
			described[e.Name] = true
		}
	}
	var out []Metric
	for _, e := range byKey {
		if e.Description == "" && described[e.Name] {
			continue
		}
		sort.Strings(e.Packages)
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Description < b.Description
	})
	for i := range out {
		p, err := prometheusName(out[i])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", out[i].Name, err)
		}
		out[i].Prometheus = p
	}
	sort.Strings(dynamic)
	return out, dynamic, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// stringConst evaluates a constant string expression of literals ("a" + "b").
func stringConst(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return stringConst(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringConst(e.X)
		b, ok2 := stringConst(e.Y)
		return a + b, ok1 && ok2
	}
	return "", false
}

// prometheusName creates the instrument in a provider of the project's Prometheus exporter
// (telemetry.NewPrometheus), records a value, and returns the name of the family that appears
// on /metrics.
func prometheusName(mt Metric) (string, error) {
	ctx := context.Background()
	baseline, err := scrapeFamilies(func(metric.Meter) error { return nil })
	if err != nil {
		return "", err
	}
	fams, err := scrapeFamilies(func(meter metric.Meter) error {
		opts := []metric.InstrumentOption{metric.WithUnit(mt.Unit), metric.WithDescription(mt.Description)}
		switch mt.Kind {
		case "counter":
			c, err := meter.Int64Counter(mt.Name, optionsOf[metric.Int64CounterOption](opts)...)
			if err != nil {
				return err
			}
			c.Add(ctx, 1)
		case "updowncounter":
			c, err := meter.Int64UpDownCounter(mt.Name, optionsOf[metric.Int64UpDownCounterOption](opts)...)
			if err != nil {
				return err
			}
			c.Add(ctx, 1)
		case "gauge":
			g, err := meter.Int64Gauge(mt.Name, optionsOf[metric.Int64GaugeOption](opts)...)
			if err != nil {
				return err
			}
			g.Record(ctx, 1)
		case "histogram":
			h, err := meter.Float64Histogram(mt.Name, optionsOf[metric.Float64HistogramOption](opts)...)
			if err != nil {
				return err
			}
			h.Record(ctx, 1)
		default:
			return fmt.Errorf("kind %q", mt.Kind)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	var names []string
	for f := range fams {
		if !baseline[f] {
			names = append(names, f)
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("want one new family on /metrics, got %v", names)
	}
	return names[0], nil
}

// optionsOf converts instrument options to the option type of one kind of instrument.
func optionsOf[T any](opts []metric.InstrumentOption) []T {
	out := make([]T, 0, len(opts))
	for _, o := range opts {
		if t, ok := any(o).(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// scrapeFamilies creates instruments with create in a new Prometheus provider and returns the
// names of the families of its /metrics (from the "# TYPE" lines).
func scrapeFamilies(create func(metric.Meter) error) (map[string]bool, error) {
	p, err := telemetry.NewPrometheus()
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	if err := create(p.Provider.Meter("docgen")); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	p.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %d", rec.Code)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out, nil
}
