package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

func chartCmd(args []string, stdout, stderr io.Writer) error {
	var out, unit *string
	t, bf, err := parseBackendCmd("chart", args, stderr, func(fs *flag.FlagSet) {
		out = fs.String("o", "", "write the SVG to this `file` (default stdout)")
		unit = fs.String("unit", "sec/op", "the `unit` to draw")
	})
	if err != nil {
		return err
	}
	if !t.hasUnit(*unit) {
		return fmt.Errorf("benchreport: no measurements in %s (have %s)", *unit, strings.Join(t.units, ", "))
	}
	svg, err := renderChart(compareBackends(t, *unit, bf.ref, bf.alpha))
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(svg)
		return err
	}
	if err := os.WriteFile(*out, svg, 0o644); err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	return nil
}

// palette colours the backends in column order; the reference comes first.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// Chart geometry, in pixels.
const (
	chartWidth  = 1000
	barHeight   = 12
	barGap      = 2
	groupGap    = 14
	charWidth   = 6.6 // of the 12px sans-serif labels, roughly
	plotTop     = 84
	valueMargin = 80 // room right of the longest bar for its value label
)

// renderChart draws c as grouped horizontal bars, one group per operation
// and one bar per backend with a value, on a logarithmic axis whose ticks
// are powers of ten. Each bar is a rect of class "bar" carrying data-op,
// data-backend and data-value attributes, with a whisker for the 95%
// confidence interval and the value printed at its end.
func renderChart(c *comparison) ([]byte, error) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range c.rows {
		for _, cc := range r.cells {
			if cc.present && cc.summary.Center > 0 {
				lo = math.Min(lo, cc.summary.Center)
				hi = math.Max(hi, cc.summary.Center)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return nil, fmt.Errorf("benchreport: no positive %s values to draw on a log scale", c.unit)
	}
	dlo, dhi := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	labelW := 0
	for _, r := range c.rows {
		labelW = max(labelW, len([]rune(r.name)))
	}
	left := math.Min(math.Max(float64(labelW)*charWidth+16, 140), 420)
	plotW := chartWidth - left - valueMargin
	x := func(v float64) float64 {
		return left + (math.Log10(v)-float64(dlo))/float64(dhi-dlo)*plotW
	}
	groupH := float64(len(c.cols)*(barHeight+barGap) + groupGap)
	plotH := groupH * float64(len(c.rows))
	height := plotTop + plotH + 48

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	better := "lower is better"
	if higherIsBetter(c.unit) {
		better = "higher is better"
	}
	fmt.Fprintf(&b, `<text x="16" y="24" font-size="16" font-weight="bold">%s by backend (median, log scale, %s)</text>`+"\n", esc(c.unit), better)
	// Legend.
	lx := 16.0
	for i, col := range c.cols {
		name := col
		if i == 0 && c.ref != "" {
			name += " (ref)"
		}
		fmt.Fprintf(&b, `<g class="legend"><rect x="%.1f" y="40" width="12" height="12" fill="%s"/><text x="%.1f" y="50">%s</text></g>`+"\n", lx, palette[i%len(palette)], lx+16, esc(name))
		lx += 16 + float64(len([]rune(name)))*charWidth + 18
	}
	// Decade grid lines and tick labels, top and bottom.
	for d := dlo; d <= dhi; d++ {
		gx := x(math.Pow(10, float64(d)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", gx, plotTop-6, gx, plotTop+plotH)
		label := esc(decadeLabel(d, c.unit))
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, plotTop-10, label)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, plotTop+plotH+16, label)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s (log scale)</text>`+"\n", left+plotW/2, plotTop+plotH+36, esc(c.unit))
	for gi, r := range c.rows {
		gy := plotTop + float64(gi)*groupH
		fmt.Fprintf(&b, `<g class="group" data-op="%s">`+"\n", esc(r.name))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-8, gy+(groupH-groupGap)/2, esc(r.name))
		for i, cc := range r.cells {
			if !cc.present || cc.summary.Center <= 0 {
				continue
			}
			by := gy + float64(i*(barHeight+barGap))
			w := math.Max(x(cc.summary.Center)-left, 1)
			fmt.Fprintf(&b, `<rect class="bar" data-op="%s" data-backend="%s" data-value="%g" x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s %s: %s %s</title></rect>`+"\n",
				esc(r.name), esc(c.cols[i]), cc.summary.Center, left, by, w, barHeight, palette[i%len(palette)],
				esc(r.name), esc(c.cols[i]), esc(scale(cc.summary.Center, c.unit)), esc(c.unit))
			if cc.summary.Lo > 0 && cc.summary.Hi > cc.summary.Lo {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n",
					x(cc.summary.Lo), by+barHeight/2, x(cc.summary.Hi), by+barHeight/2)
			}
			text := scale(cc.summary.Center, c.unit)
			if cc.vsRef && cc.ratio > 0 {
				text += fmt.Sprintf(" %.2f×", cc.ratio)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" dominant-baseline="middle" fill="#333">%s</text>`+"\n",
				left+w+4, by+barHeight/2, esc(text))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// decadeLabel formats 10^d with an SI prefix and the unit's base symbol:
// 1ns, 10ns, 100ns, 1µs for sec/op (and for cpu-sec/op, sync-sec/op...).
func decadeLabel(d int, unit string) string {
	p := d - ((d%3)+3)%3 // the multiple of 3 at or below d
	mant := []string{"1", "10", "100"}[d-p]
	prefixes := map[int]string{-18: "a", -15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}
	prefix, ok := prefixes[p]
	if !ok {
		return fmt.Sprintf("1e%d", d)
	}
	sym := ""
	switch {
	case strings.HasPrefix(unit, "sec/") || strings.Contains(unit, "-sec/"):
		sym = "s"
	case strings.HasPrefix(unit, "B/"):
		sym = "B"
	}
	return mant + prefix + sym
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
