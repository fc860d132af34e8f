package docgen

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kelemetry/kelemetry/internal/configfile"
)

// MetricNamesOptions is what CheckMetricNames checks.
type MetricNamesOptions struct {
	// Root is the repository root; Files are the Markdown files to check, relative to it.
	Root  string
	Files []string
	// Metrics are the instruments of the code (Metrics): a file names each as /metrics shows it
	// (Metric.Prometheus), not by its OpenTelemetry name (Metric.Name), except in a paragraph (or
	// table) about the naming: one that says "OpenTelemetry" and gives the name on /metrics too.
	Metrics []Metric
	// Prefix starts the name on /metrics of every metric of Metrics ("kelemetry_"): a word of a
	// file that starts with it must be a name on /metrics, of Metrics (a histogram's _bucket,
	// _sum and _count series included) or of Configured. A word that ends with "_" or that a
	// pattern continues (*, (, |, +, ?: a regular expression or a glob) must start such a name.
	Prefix string
	// Configured are names on /metrics that a configuration defines: kelemetrix's metrics.
	Configured map[string]bool
}

var (
	// dottedWord is a word with dots (kelemetry.audit.webhook.rejected, kelemetry.io).
	dottedWord = regexp.MustCompile(`[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)+`)
	word       = regexp.MustCompile(`[A-Za-z0-9_]+`)
)

// CheckMetricNames checks that the Markdown files of o name the metrics of the code as
// /metrics shows them (see MetricNamesOptions). It reads every line, code blocks included (PromQL,
// a grep of /metrics). Report.Files counts the files read; Report.MetricNames the metric names
// found.
func CheckMetricNames(o MetricNamesOptions) Report {
	r := Report{}
	byName := map[string]string{}        // OpenTelemetry name -> name on /metrics
	known := map[string]bool{}           // names on /metrics
	byUnderscored := map[string]string{} // OpenTelemetry name with underscores -> name on /metrics
	for _, m := range o.Metrics {
		byName[m.Name] = m.Prometheus
		known[m.Prometheus] = true
		underscored := strings.ReplaceAll(m.Name, ".", "_")
		byUnderscored[underscored] = m.Prometheus
		if m.Kind == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.Prometheus+s] = true
				byUnderscored[underscored+s] = m.Prometheus + s
			}
		}
	}
	for n := range o.Configured {
		known[n] = true
	}
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)

	for _, f := range o.Files {
		data, err := os.ReadFile(filepath.Join(o.Root, filepath.FromSlash(f)))
		if err != nil {
			r.problem(f, 0, "%v", err)
			continue
		}
		r.Files++
		lines := strings.Split(string(data), "\n")
		paras := paragraphs(lines)
		for i, line := range lines {
			n := i + 1
			for _, m := range dottedWord.FindAllStringIndex(line, -1) {
				w := line[m[0]:m[1]]
				if m[0] > 0 && line[m[0]-1] == '.' {
					continue // the end of a longer dotted word
				}
				prom, ok := byName[w]
				if !ok {
					continue
				}
				r.MetricNames++
				if p := paras[i]; !strings.Contains(p, "OpenTelemetry") || !strings.Contains(p, prom) {
					r.problem(f, n, "%s is an OpenTelemetry name: /metrics shows %s (%s)", w, prom, MetricsPagePath)
				}
			}
			if o.Prefix == "" {
				continue
			}
			for _, m := range word.FindAllStringIndex(line, -1) {
				w := line[m[0]:m[1]]
				if !strings.HasPrefix(w, o.Prefix) {
					continue
				}
				r.MetricNames++
				if known[w] {
					continue
				}
				if strings.HasSuffix(w, "_") || m[1] < len(line) && strings.IndexByte("*(|+?", line[m[1]]) >= 0 {
					if startsAny(names, w) {
						continue
					}
					r.problem(f, n, "%s starts no name on /metrics (%s)", w, MetricsPagePath)
					continue
				}
				if right, ok := byUnderscored[w]; ok {
					r.problem(f, n, "%s is not on /metrics: it shows %s (%s)", w, right, MetricsPagePath)
				} else if right, ok := configfile.Closest(w, names); ok {
					r.problem(f, n, "%s is not on /metrics: %s? (%s)", w, right, MetricsPagePath)
				} else {
					r.problem(f, n, "%s is not on /metrics (%s)", w, MetricsPagePath)
				}
			}
		}
	}
	sort.Strings(r.Problems)
	return r
}

// startsAny reports whether a name of the sorted names starts with prefix.
func startsAny(sorted []string, prefix string) bool {
	i := sort.SearchStrings(sorted, prefix)
	return i < len(sorted) && strings.HasPrefix(sorted[i], prefix)
}

// paragraphs returns, for each line, the text of its paragraph: the lines around it up to blank
// lines (a table is one).
func paragraphs(lines []string) []string {
	out := make([]string, len(lines))
	for start := 0; start < len(lines); {
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "" {
			end++
		}
		text := strings.Join(lines[start:end], "\n")
		for i := start; i < end; i++ {
			out[i] = text
		}
		start = end + 1
	}
	return out
}
