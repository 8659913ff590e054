package tracer

import (
	"bufio"
	"encoding/xml"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FlameSink writes a self-contained SVG flame graph of the merged call stacks (the stacks
// FoldedSink writes): one box per frame, its width the frame's inclusive time (its own self
// time plus that of every stack above it), the roots on an "all" frame at the bottom,
// siblings in alphabetical order. Each box has a tooltip with the name, time and share of the
// total. Frames narrower than 0.1% of the total are left out (their time still counts in
// their parents). A short inline script zooms into a clicked frame; without scripts the
// graph is still complete. The output depends only on the input.
type FlameSink struct {
	agg   *stackAggregator
	w     io.Writer
	title string
	Width int // image width in pixels; 0 for 1200
}

// NewFlameSink writes to w; title heads the graph.
func NewFlameSink(w io.Writer, title string) *FlameSink {
	return &FlameSink{agg: newStackAggregator(), w: w, title: title}
}

// BeginThread does nothing: stacks are merged across threads.
func (s *FlameSink) BeginThread(*Header, *Thread) error { return nil }

// Call aggregates one call.
func (s *FlameSink) Call(c *Call) error { s.agg.call(c); return nil }

// Skip hands a dropped call's subtrees up.
func (s *FlameSink) Skip(d int) error { s.agg.skip(d); return nil }

// EndThread closes the thread's stacks.
func (s *FlameSink) EndThread() error { s.agg.endThread(); return nil }

// Layout of the graph, in pixels.
const (
	flamePad       = 10   // left, right and bottom margin
	flameTop       = 54   // room for the title and the subtitle
	flameRow       = 16   // height of a row of frames
	flameFont      = 12   // font size of the frame labels
	flameCharWidth = 7.3  // approximate advance of one monospace character at flameFont
	flameMinShare  = 1000 // frames below 1/flameMinShare of the total are left out
)

// flameNode is a frame of the merged tree: value is the self time of every stack that has
// this frame's stack as a prefix.
type flameNode struct {
	value uint64
	kids  map[string]*flameNode
}

// flameFrame is a frame to draw, in time units: it starts off nanoseconds after the start of
// the "all" frame.
type flameFrame struct {
	name       string
	depth      int
	off, value uint64
	root       bool // the "all" frame
}

// flameFrames merges the aggregated stacks into a tree and lays it out: the "all" frame
// first, then every frame wide enough to draw, parents before children, siblings sorted.
func flameFrames(agg *stackAggregator) []flameFrame {
	root := &flameNode{}
	for k, v := range agg.stacks {
		if v.self == 0 {
			continue
		}
		n := root
		n.value += v.self
		for _, f := range strings.Split(k, ";") {
			c := n.kids[f]
			if c == nil {
				if n.kids == nil {
					n.kids = map[string]*flameNode{}
				}
				c = &flameNode{}
				n.kids[f] = c
			}
			c.value += v.self
			n = c
		}
	}
	if root.value == 0 {
		return nil
	}
	out := []flameFrame{{name: "all", value: root.value, root: true}}
	var walk func(n *flameNode, depth int, off uint64)
	walk = func(n *flameNode, depth int, off uint64) {
		names := make([]string, 0, len(n.kids))
		for k := range n.kids {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			c := n.kids[k]
			// c.value*flameMinShare cannot overflow in practice: that would take 584 years of calls
			if c.value*flameMinShare >= root.value {
				out = append(out, flameFrame{name: k, depth: depth, off: off, value: c.value})
				walk(c, depth+1, off)
			}
			off += c.value
		}
	}
	walk(root, 1, 0)
	return out
}

// Close writes the SVG.
func (s *FlameSink) Close(t Totals) error {
	width := s.Width
	if width <= 0 {
		width = 1200
	}
	frames := flameFrames(s.agg)
	rows := 1
	for _, f := range frames {
		rows = max(rows, f.depth+1)
	}
	height := flameTop + rows*flameRow + flamePad
	var note string
	if len(frames) == 0 {
		height = flameTop + 3*flameRow
		note = "no calls"
		if t.Kept > 0 {
			note = "no measurable time in " + strconv.FormatUint(t.Kept, 10) + " calls"
		}
	} else {
		note = formatMillis(frames[0].value) + " ms of self time in " + strconv.FormatUint(t.Kept, 10) + " calls; hover for details, click to zoom"
	}

	w := bufio.NewWriter(s.w)
	var b []byte
	b = append(b, `<?xml version="1.0" encoding="UTF-8" standalone="no"?>`+"\n"...)
	b = append(b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="`...)
	b = strconv.AppendInt(b, int64(width), 10)
	b = append(b, `" height="`...)
	b = strconv.AppendInt(b, int64(height), 10)
	b = append(b, `" viewBox="0 0 `...)
	b = strconv.AppendInt(b, int64(width), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(height), 10)
	b = append(b, "\">\n<style>\n"+
		"text { font-family: monospace; font-size: "+strconv.Itoa(flameFont)+"px; fill: #000; }\n"+
		".f rect { stroke: #fff; stroke-width: 0.5; }\n"+
		".f:hover rect { stroke: #000; stroke-width: 1; }\n"+
		".f text { pointer-events: none; }\n"+
		"</style>\n"...)
	b = append(b, `<rect x="0" y="0" width="100%" height="100%" fill="#fdfdf6"/>`+"\n"...)
	b = append(b, `<text x="`...)
	b = strconv.AppendInt(b, int64(width/2), 10)
	b = append(b, `" y="24" text-anchor="middle" style="font-size:16px">`...)
	b = appendXML(b, s.title)
	b = append(b, "</text>\n<text x=\""...)
	b = strconv.AppendInt(b, int64(width/2), 10)
	b = append(b, `" y="42" text-anchor="middle" fill="#555">`...)
	b = appendXML(b, note)
	b = append(b, "</text>\n"...)
	if len(frames) == 0 {
		b = append(b, "</svg>\n"...)
		w.Write(b)
		return w.Flush()
	}
	b = append(b, `<text id="reset" x="`+strconv.Itoa(flamePad)+`" y="24" style="display:none;cursor:pointer">Reset zoom</text>`+"\n"...)

	inner := float64(width - 2*flamePad)
	total := float64(frames[0].value)
	for _, f := range frames {
		x := flamePad + float64(f.off)/total*inner
		fw := float64(f.value) / total * inner
		y := height - flamePad - (f.depth+1)*flameRow
		b = append(b, `<g class="f"><title>`...)
		b = appendXML(b, f.name)
		b = append(b, " ("...)
		b = append(b, formatMillis(f.value)...)
		b = append(b, " ms, "...)
		b = strconv.AppendFloat(b, float64(f.value)*100/total, 'f', 1, 64)
		b = append(b, " %)</title><rect x=\""...)
		b = strconv.AppendFloat(b, x, 'f', 2, 64)
		b = append(b, `" y="`...)
		b = strconv.AppendInt(b, int64(y), 10)
		b = append(b, `" width="`...)
		b = strconv.AppendFloat(b, fw, 'f', 2, 64)
		b = append(b, `" height="`...)
		b = strconv.AppendInt(b, flameRow-1, 10)
		b = append(b, `" rx="2" fill="`...)
		b = appendFlameColor(b, f.name, f.root)
		b = append(b, `"/><text x="`...)
		b = strconv.AppendFloat(b, x+3, 'f', 2, 64)
		b = append(b, `" y="`...)
		b = strconv.AppendInt(b, int64(y+flameRow-5), 10)
		b = append(b, `">`...)
		b = appendXML(b, flameLabel(f.name, fw))
		b = append(b, "</text></g>\n"...)
		if len(b) > 1<<15 {
			w.Write(b)
			b = b[:0]
		}
	}
	b = append(b, "<script type=\"text/ecmascript\"><![CDATA[\n"...)
	b = append(b, strings.NewReplacer("WIDTH", strconv.FormatFloat(inner, 'f', -1, 64),
		"PAD", strconv.Itoa(flamePad), "CHARW", strconv.FormatFloat(flameCharWidth, 'f', -1, 64)).Replace(flameScript)...)
	b = append(b, "]]></script>\n</svg>\n"...)
	w.Write(b)
	return w.Flush()
}

// flameScript zooms: a clicked frame and its descendants fill the width, its ancestors span it
// dimmed, everything else hides; "Reset zoom" (or the "all" frame) goes back. Labels are
// re-truncated with the same rule as flameLabel. Keep it free of "]]>".
const flameScript = `(function () {
  var W = WIDTH, P = PAD, CW = CHARW, E = 0.02;
  var reset = document.getElementById("reset");
  var fs = Array.prototype.map.call(document.querySelectorAll("g.f"), function (g) {
    var r = g.querySelector("rect"), t = g.querySelector("text"), n = g.querySelector("title").textContent;
    return { g: g, r: r, t: t, n: Array.from(n.slice(0, n.lastIndexOf(" ("))),
      x: +r.getAttribute("x"), w: +r.getAttribute("width"), y: +r.getAttribute("y") };
  });
  function label(f, w) {
    var n = Math.floor((w - 6) / CW);
    return n >= f.n.length ? f.n.join("") : n >= 3 ? f.n.slice(0, n - 2).join("") + ".." : "";
  }
  function zoom(z) {
    fs.forEach(function (f) {
      var x = f.x, w = f.w, show = true, dim = false;
      if (z && f.y > z.y) {
        show = dim = f.x <= z.x + E && f.x + f.w >= z.x + z.w - E;
        x = P; w = W;
      } else if (z) {
        show = f.x >= z.x - E && f.x + f.w <= z.x + z.w + E;
        x = P + (f.x - z.x) * W / z.w; w = f.w * W / z.w;
      }
      f.g.style.display = show ? "" : "none";
      f.g.style.opacity = dim ? "0.6" : "";
      f.r.setAttribute("x", x.toFixed(2));
      f.r.setAttribute("width", w.toFixed(2));
      f.t.setAttribute("x", (x + 3).toFixed(2));
      f.t.textContent = label(f, w);
    });
    reset.style.display = z ? "" : "none";
  }
  fs.forEach(function (f) {
    f.g.style.cursor = "pointer";
    f.g.addEventListener("click", function () { zoom(f); });
  });
  reset.addEventListener("click", function () { zoom(null); });
})();
`

// flameLabel is name cut to what fits in a box w pixels wide: whole, or its start and "..",
// or nothing when not even three characters fit.
func flameLabel(name string, w float64) string {
	n := int((w - 6) / flameCharWidth)
	if w < 6 || n < 3 {
		return ""
	}
	if utf8.RuneCountInString(name) <= n {
		return name
	}
	i := 0
	for j := range name { // by runes, invalid bytes counting one each
		if i == n-2 {
			return name[:j] + ".."
		}
		i++
	}
	return name
}

// appendFlameColor appends a warm colour (reds, oranges, yellows) picked by a hash of name;
// the "all" frame is grey.
func appendFlameColor(b []byte, name string, root bool) []byte {
	if root {
		return append(b, "rgb(200,200,200)"...)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	r := 205 + v%50
	g := 60 + (v>>8)%170
	bl := (v >> 16) % 60
	b = append(b, "rgb("...)
	b = strconv.AppendUint(b, uint64(r), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(g), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(bl), 10)
	return append(b, ')')
}

// formatMillis writes nanoseconds as milliseconds with three decimals, exactly.
func formatMillis(ns uint64) string {
	f := ns / 1000 % 1000
	return strconv.FormatUint(ns/1000000, 10) + "." + string([]byte{byte('0' + f/100), byte('0' + f/10%10), byte('0' + f%10)})
}

// appendXML appends s escaped as XML character data (also safe in attribute values): the
// five special characters become entities, tab, newline and carriage return character
// references, and what XML cannot hold (other control characters, invalid UTF-8) U+FFFD.
func appendXML(b []byte, s string) []byte {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s)) // a strings.Builder never fails
	return append(b, sb.String()...)
}

// Mark is not shown yet.
func (s *FlameSink) Mark(*Mark) error { return nil }
