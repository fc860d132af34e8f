package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// report prints the curves as Markdown tables.
func (c *curves) report(out io.Writer, embedded, jpoints []point) {
	fmt.Fprintf(out, "Ingest with spans already stored (embedded store, %d distinct copies of the fixture per run, median of %d rounds: each round starts the all-in-one on a fresh copy of every point's store in turn):\n\n", c.o.copies, c.o.runs)
	fmt.Fprintln(out, "| spans stored | distinct events per CPU-second | CPU per event | against the empty store |")
	fmt.Fprintln(out, "| --- | --- | --- | --- |")
	var empty float64
	for _, p := range embedded {
		if p.evPerS == 0 {
			continue
		}
		if empty == 0 {
			empty = p.evPerS
		}
		fmt.Fprintf(out, "| %s | %s | %.1f µs | %+.1f%% |\n", millions(p.stored), thousands(p.evPerS), 1e6/p.evPerS, (empty/p.evPerS-1)*100)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "Queries: a Deployment drawn whole (tracing, full tree, 4 windows) by GET /api/traces, median (slowest) of 5 queries after one to warm up, 3 for 10,000 Pods, in each of the %d rounds (embedded store); through Jaeger each query cold (after the reader's 10-second cache of traces expired):\n\n", c.o.runs)
	head := "| reader | spans stored |"
	sep := "| --- | --- |"
	for _, pods := range c.o.trees {
		head += fmt.Sprintf(" %s-pod tree |", thousands(float64(pods)))
		sep += " --- |"
	}
	head += " peak RSS of the process that answered |"
	sep += " --- |"

	fmt.Fprintln(out, head)
	fmt.Fprintln(out, sep)
	for _, set := range []struct {
		name string
		pts  []point
	}{{"embedded store", embedded}, {"Jaeger (Badger) through jaeger.storage.v2", jpoints}} {
		for _, p := range set.pts {
			row := fmt.Sprintf("| %s | %s |", set.name, millions(p.stored))
			for i := range p.queries {
				row += fmt.Sprintf(" %s (%s) |", ms(p.queries[i]), ms(p.slowest[i]))
			}
			if p.queryRSS > 0 {
				row += fmt.Sprintf(" %d MiB |", p.queryRSS>>20)
			} else {
				row += " |"
			}
			fmt.Fprintln(out, row)
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func millions(n int) string {
	if n == 0 {
		return "0"
	}
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%d million", n/1_000_000)
	}
	return thousands(float64(n))
}

// thousands formats a count with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// series is one line of a chart: x in millions of spans stored.
type series struct {
	name   string
	color  string
	dashed bool
	x, y   []float64
}

// drawSVG draws two charts side by side: ingest CPU per event, and query time, against the
// spans stored.
func drawSVG(trees []int, embedded, jpoints []point) string {
	ingest := series{name: "embedded store", color: "#1f77b4"}
	for _, p := range embedded {
		if p.evPerS > 0 {
			ingest.x = append(ingest.x, float64(p.stored)/1e6)
			ingest.y = append(ingest.y, 1e6/p.evPerS)
		}
	}
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	var queries []series
	for i, pods := range trees {
		for j, set := range []struct {
			name string
			pts  []point
		}{{"embedded", embedded}, {"Jaeger reader", jpoints}} {
			s := series{name: fmt.Sprintf("%s pods, %s", thousands(float64(pods)), set.name), color: colors[i%len(colors)], dashed: j == 1}
			for _, p := range set.pts {
				if i < len(p.queries) {
					s.x = append(s.x, float64(p.stored)/1e6)
					s.y = append(s.y, float64(p.queries[i])/float64(time.Millisecond))
				}
			}
			if len(s.x) > 0 {
				queries = append(queries, s)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="960" height="380" viewBox="0 0 960 380" font-family="sans-serif" font-size="12">`+"\n")
	b.WriteString(`<rect width="960" height="380" fill="white"/>` + "\n")
	chart(&b, 0, "Ingest: CPU per distinct event (µs)", []series{ingest}, nil, false)
	chart(&b, 480, "Query: a Deployment tree drawn whole (ms, log)", queries, []float64{100, 500}, true)
	b.WriteString("</svg>\n")
	return b.String()
}

// chart draws one chart at x offset left, 480 wide; guides are dotted horizontal lines (targets);
// logY draws the y axis in powers of ten.
func chart(b *strings.Builder, left float64, title string, ss []series, guides []float64, logY bool) {
	const w, h, padL, padR, padT, padB = 480.0, 380.0, 60.0, 20.0, 40.0, 110.0
	x0, x1, y0, y1 := left+padL, left+w-padR, padT, h-padB
	maxX, maxY := 1.0, 1.0
	for _, s := range ss {
		for i := range s.x {
			maxX, maxY = math.Max(maxX, s.x[i]), math.Max(maxY, s.y[i])
		}
	}
	for _, g := range guides {
		maxY = math.Max(maxY, g)
	}
	maxY = niceCeil(maxY * 1.1)
	maxX = niceCeil(maxX)
	px := func(v float64) float64 { return x0 + (x1-x0)*v/maxX }
	py := func(v float64) float64 { return y1 - (y1-y0)*v/maxY }
	yticks := []float64{0, maxY / 5, 2 * maxY / 5, 3 * maxY / 5, 4 * maxY / 5, maxY}
	if logY {
		minY := maxY
		for _, s := range ss {
			for _, v := range s.y {
				minY = math.Min(minY, v)
			}
		}
		lo := math.Pow(10, math.Floor(math.Log10(math.Max(minY, 1))))
		hi := math.Pow(10, math.Ceil(math.Log10(maxY)))
		py = func(v float64) float64 {
			return y1 - (y1-y0)*(math.Log10(math.Max(v, lo))-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
		}
		yticks = nil
		for t := lo; t <= hi; t *= 10 {
			yticks = append(yticks, t)
		}
	}
	fmt.Fprintf(b, `<text x="%.0f" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", x0, esc(title))
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", x0, y1, x1, y1)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", x0, y0, x0, y1)
	for _, v := range yticks {
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			x0, py(v), x1, py(v), x0-6, py(v)+4, trimFloat(v))
	}
	for i := 0; i <= 5; i++ {
		xv := maxX * float64(i) / 5
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", px(xv), y1+16, trimFloat(xv))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">spans already stored (millions)</text>`+"\n", (x0+x1)/2, y1+34)
	for _, g := range guides {
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#888" stroke-dasharray="2,3"/><text x="%.0f" y="%.1f" fill="#888" text-anchor="end">%s ms</text>`+"\n",
			x0, py(g), x1, py(g), x1, py(g)-3, trimFloat(g))
	}
	for i, s := range ss {
		var pts []string
		for j := range s.x {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[j]), py(s.y[j])))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		for j := range s.x {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(s.x[j]), py(s.y[j]), s.color)
		}
		ly := y1 + 52 + float64(i)*14
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			x0, ly-4, x0+24, ly-4, s.color, dash, x0+30, ly, esc(s.name))
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
