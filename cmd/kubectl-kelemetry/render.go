package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// criticalPath is the answer of GET /api/critical-path/{id}.
type criticalPath struct {
	Data struct {
		Start           time.Time `json:"start"`
		DurationSeconds float64   `json:"durationSeconds"`
		NoPath          string    `json:"noPath"`
		Steps           []struct {
			Time   time.Time `json:"time"`
			Object struct {
				Cluster, Group, Resource, Namespace, Name string
			} `json:"object"`
			Controller  string  `json:"controller"`
			Verb        string  `json:"verb"`
			Rule        string  `json:"rule"`
			WaitSeconds float64 `json:"waitSeconds"`
			ActSeconds  float64 `json:"actSeconds"`
		} `json:"steps"`
	} `json:"data"`
}

const (
	bold   = "\x1b[1m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	dim    = "\x1b[2m"
	reset  = "\x1b[0m"
)

// row is one line of a table: its cells, and the colour of the whole line.
type row struct {
	cells []string
	color string
}

// writeTable writes rows with columns padded to their widest cell (runes, not bytes), as kubectl
// get prints; colour codes wrap whole lines so that they do not count.
func writeTable(w io.Writer, rows []row, color bool) error {
	widths := map[int]int{}
	for _, r := range rows {
		for i, c := range r.cells {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		if color && r.color != "" {
			b.WriteString(r.color)
		}
		for i, c := range r.cells {
			b.WriteString(c)
			if i < len(r.cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+3))
			}
		}
		if color && r.color != "" {
			b.WriteString(reset)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// objectKey names an object of a span or a critical-path step, to match them.
func objectKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

// renderTree prints the trace's objects as a tree under its root: each object's first event
// after the trace's start, how long its events spanned, how many events and failed requests
// it has, and its last event; the objects of the critical path are marked with * (in colour on a
// terminal).
func renderTree(w io.Writer, tr jaegerTrace, cp criticalPath, color bool) error {
	critical := map[string]bool{}
	for _, st := range cp.Data.Steps {
		critical[objectKey(st.Object.Resource, st.Object.Namespace, st.Object.Name)] = true
	}
	byID := map[string]*jaegerSpan{}
	for i := range tr.Spans {
		byID[tr.Spans[i].SpanID] = &tr.Spans[i]
	}
	children := map[string][]*jaegerSpan{}
	var roots []*jaegerSpan
	start := int64(0)
	for i := range tr.Spans {
		sp := &tr.Spans[i]
		if start == 0 || sp.StartTime < start {
			start = sp.StartTime
		}
		parent := ""
		for _, r := range sp.References {
			if r.RefType == "CHILD_OF" && byID[r.SpanID] != nil {
				parent = r.SpanID
				break
			}
		}
		if parent == "" {
			roots = append(roots, sp)
		} else {
			children[parent] = append(children[parent], sp)
		}
	}
	order := func(s []*jaegerSpan) {
		sort.SliceStable(s, func(i, j int) bool {
			if s[i].StartTime != s[j].StartTime {
				return s[i].StartTime < s[j].StartTime
			}
			return s[i].OperationName < s[j].OperationName
		})
	}
	order(roots)
	rows := []row{{cells: []string{"  OBJECT", "START", "DURATION", "EVENTS", "FAILED", "LAST EVENT"}, color: bold}}
	var walk func(sp *jaegerSpan, prefix, branch string)
	walk = func(sp *jaegerSpan, prefix, branch string) {
		name := sp.tag("resource") + "/" + sp.tag("name")
		if sp.tag("resource") == "" {
			name = sp.OperationName
		}
		mark, c := "  ", ""
		if critical[objectKey(sp.tag("resource"), sp.tag("namespace"), sp.tag("name"))] {
			mark, c = "* ", yellow
		}
		failed, last := 0, ""
		for _, l := range sp.Logs {
			for _, f := range l.Fields {
				if f.Key == "responseCode" {
					if code, err := strconv.Atoi(fmt.Sprint(f.Value)); err == nil && code >= 400 {
						failed++
					}
				}
			}
			last = logSummary(l.Fields)
		}
		if failed > 0 && c == "" {
			c = red
		}
		rows = append(rows, row{cells: []string{mark + prefix + branch + name,
			"+" + shortDuration(time.Duration(sp.StartTime-start)*time.Microsecond),
			shortDuration(time.Duration(sp.Duration) * time.Microsecond),
			strconv.Itoa(len(sp.Logs)), strconv.Itoa(failed), clip(last, 60)}, color: c})
		kids := children[sp.SpanID]
		order(kids)
		next := prefix
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		for i, k := range kids {
			b := "├─ "
			if i == len(kids)-1 {
				b = "└─ "
			}
			walk(k, next, b)
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	if err := writeTable(w, rows, color); err != nil {
		return err
	}
	if len(cp.Data.Steps) > 0 {
		_, err := fmt.Fprintf(w, "\n* on the critical path: %d steps, %s from the first to the last (--mode critical lists them)\n",
			len(cp.Data.Steps), shortDuration(time.Duration(cp.Data.DurationSeconds*float64(time.Second))))
		return err
	}
	return nil
}

// logSummary is what a span log says in a few words: the audit event ("alice patch"), the
// Kubernetes Event, or the first field.
func logSummary(fields []struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
},
) string {
	for _, key := range []string{"audit", "event", "message"} {
		for _, f := range fields {
			if f.Key == key {
				return fmt.Sprint(f.Value)
			}
		}
	}
	if len(fields) > 0 {
		return fields[0].Key + "=" + fmt.Sprint(fields[0].Value)
	}
	return ""
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// renderCritical prints the critical path's steps: when each started after the first, how long
// it waited for its cause and took, the object, who acted and why the step follows the previous.
func renderCritical(w io.Writer, cp criticalPath, color bool) error {
	if len(cp.Data.Steps) == 0 {
		why := cp.Data.NoPath
		if why == "" {
			why = "the trace has no steps"
		}
		_, err := fmt.Fprintln(w, "no critical path: "+why)
		return err
	}
	rows := []row{{cells: []string{"AT", "WAIT", "TOOK", "OBJECT", "BY", "VERB", "RULE"}, color: bold}}
	for _, st := range cp.Data.Steps {
		c := ""
		if st.WaitSeconds >= 1 {
			c = yellow // a long wait: where the time went
		}
		rows = append(rows, row{cells: []string{
			"+" + shortDuration(st.Time.Sub(cp.Data.Start)),
			shortDuration(time.Duration(st.WaitSeconds * float64(time.Second))),
			shortDuration(time.Duration(st.ActSeconds * float64(time.Second))),
			st.Object.Resource + "/" + st.Object.Name, st.Controller, st.Verb, st.Rule,
		}, color: c})
	}
	if err := writeTable(w, rows, color); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d steps, %s in all\n", len(cp.Data.Steps), shortDuration(time.Duration(cp.Data.DurationSeconds*float64(time.Second))))
	return err
}
