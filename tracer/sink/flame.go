package sink

import (
	"bufio"
	"encoding/xml"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/msgtrace/msgtrace/tracer/engine"
)

// FlameSink writes a self-contained SVG flame graph, one section per thread, stacked top to
// bottom: at the bottom of a section the thread's own frame (its name), above it the calls it
// made, each box as wide as the frame's inclusive time (its self time plus that of every stack
// above it) within that thread, siblings in alphabetical order. Each box has a tooltip with the
// name, time and share of the thread. Every frame is in the file, however narrow, so that
// zooming (click a frame; "Reset zoom") reaches all of them, up to FlameMaxFrames frames; past
// that the narrowest frames are left out, and the subtitle says how many and points to the
// speedscope and pprof outputs, which hold everything. "Search" highlights the frames whose
// name contains a text and says what share of the time they cover; the page's script also
// exposes it as flameSearch(text), which returns the number of frames found. The output
// depends only on the input.
type FlameSink struct {
	engine.Sink
	agg   *engine.StackTrie
	w     io.Writer
	title string
	Width int  // image width in pixels; 0 for 1200
	Meta  Meta // unused by the graph for now; kept for symmetry with the other sinks
}

// FlameMaxFrames caps the number of frames in a flame graph, to keep the file small enough
// for a browser to draw (about 250 bytes a frame).
const FlameMaxFrames = 100000

// NewFlameSink writes to w; title heads the graph.
func NewFlameSink(w io.Writer, title string) *FlameSink {
	s := &FlameSink{agg: engine.NewStackTrie(), w: w, title: title}
	s.Sink = engine.PreOrder(flameTree{s.agg, s})
	return s
}

// Needs: an aggregate, its trie filled directly when no filter drops calls.
func (s *FlameSink) Needs() engine.Needs {
	return engine.Needs{Tree: flameTree{s.agg, s}, Stacks: s.agg}
}

type flameTree struct {
	*engine.StackTrie
	s *FlameSink
}

// Layout of the graph, in pixels.
const (
	flamePad       = 10  // left, right and bottom margin
	flameTop       = 54  // room for the title and the subtitle
	flameRow       = 16  // height of a row of frames
	flameGap       = 24  // space between thread sections
	flameFont      = 12  // font size of the frame labels
	flameCharWidth = 7.3 // approximate advance of one monospace character at flameFont
)

// flameFrame is a frame to draw, in time units: it starts off nanoseconds after the start of
// its thread's frame.
type flameFrame struct {
	Name       string
	section    int
	depth      int
	off, value uint64
	total      uint64 // the section's (thread's) total
	root       bool   // the thread's frame
}

// flameFrames lays out the trie: per thread (in the order they came), the thread's frame, then
// its frames parents first, siblings sorted; at most max frames, the narrowest (by share of
// their thread) left out past that. It returns the frames and how many were left out.
func flameFrames(a *engine.StackTrie, maxFrames int) ([]flameFrame, int) {
	incl := make([]uint64, len(a.Nodes))
	kids := make([][]int32, len(a.Nodes))
	for i := len(a.Nodes) - 1; i >= 0; i-- { // children come after their parents
		incl[i] += a.Nodes[i].Self
		if p := a.Nodes[i].Parent; p >= 0 {
			incl[p] += incl[i]
			kids[p] = append(kids[p], int32(i))
		}
	}
	// cut: a frame is drawn if its share of its thread is at least cut (compared exactly as
	// value*cutDen >= total*cutNum); past maxFrames, the share of the maxFrames-th frame.
	type share struct{ v, t uint64 }
	var shares []share
	rootOf := make([]int32, len(a.Nodes))
	for i := range a.Nodes {
		if p := a.Nodes[i].Parent; p >= 0 {
			rootOf[i] = rootOf[p]
		} else {
			rootOf[i] = int32(i)
		}
		if incl[i] > 0 {
			shares = append(shares, share{incl[i], incl[rootOf[i]]})
		}
	}
	less := func(x, y share) bool { return float64(x.v)/float64(x.t) < float64(y.v)/float64(y.t) }
	var cut share
	dropped := 0
	if len(shares) > maxFrames {
		sort.Slice(shares, func(i, j int) bool { return less(shares[j], shares[i]) })
		cut = shares[maxFrames-1]
		for _, s := range shares[maxFrames:] {
			if less(s, cut) {
				dropped++
			}
		}
	}
	var out []flameFrame
	si := -1 // the section: threads without time have none
	for _, th := range a.Threads {
		total := incl[th.Root]
		if total == 0 {
			continue
		}
		si++
		out = append(out, flameFrame{Name: th.Label, section: si, value: total, total: total, root: true})
		var walk func(n int32, depth int, off uint64)
		walk = func(n int32, depth int, off uint64) {
			ks := kids[n]
			sort.Slice(ks, func(i, j int) bool { return a.Names[a.Nodes[ks[i]].Name] < a.Names[a.Nodes[ks[j]].Name] })
			for _, k := range ks {
				if incl[k] > 0 && (cut.t == 0 || !less(share{incl[k], total}, cut)) {
					out = append(out, flameFrame{Name: engine.DisplayName(a.Names[a.Nodes[k].Name]), section: si, depth: depth, off: off, value: incl[k], total: total})
					walk(k, depth+1, off)
				}
				off += incl[k]
			}
		}
		walk(th.Root, 1, 0)
	}
	return out, dropped
}

// Close writes the SVG.
func (f flameTree) Close(t engine.Totals) error {
	s := f.s
	width := s.Width
	if width <= 0 {
		width = 1200
	}
	frames, dropped := flameFrames(f.StackTrie, FlameMaxFrames)
	// rows per section, and where each section's bottom row is
	var rows []int
	for _, fr := range frames {
		if fr.root {
			rows = append(rows, 1)
		}
		rows[len(rows)-1] = max(rows[len(rows)-1], fr.depth+1)
	}
	height := flameTop
	bottoms := make([]int, len(rows))
	for i, r := range rows {
		if i > 0 {
			height += flameGap
		}
		height += r * flameRow
		bottoms[i] = height
	}
	height += flamePad
	var note string
	if len(frames) == 0 {
		height = flameTop + 3*flameRow
		note = "no calls"
		if t.Kept > 0 {
			note = "no measurable time in " + strconv.FormatUint(t.Kept, 10) + " calls"
		}
	} else {
		var total uint64
		for _, fr := range frames {
			if fr.root {
				total += fr.value
			}
		}
		note = formatMillis(total) + " ms of self time in " + strconv.FormatUint(t.Kept, 10) + " calls on " +
			strconv.Itoa(len(rows)) + " threads; hover for details, click to zoom"
		if dropped > 0 {
			note = strconv.Itoa(dropped) + " narrowest frames left out (more than " + strconv.Itoa(FlameMaxFrames) +
				"): open the .speedscope.json in speedscope or the pprof profile for all; " + note
		}
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
		".f.hit rect { fill: rgb(230,0,230); }\n"+
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
	b = append(b, `<text id="search" x="`+strconv.Itoa(width-flamePad)+`" y="24" text-anchor="end" style="cursor:pointer">Search</text>`+"\n"...)
	b = append(b, `<text id="matched" x="`+strconv.Itoa(width-flamePad)+`" y="42" text-anchor="end"></text>`+"\n"...)

	inner := float64(width - 2*flamePad)
	for _, fr := range frames {
		total := float64(fr.total)
		x := flamePad + float64(fr.off)/total*inner
		fw := float64(fr.value) / total * inner
		y := bottoms[fr.section] - (fr.depth+1)*flameRow
		b = append(b, `<g class="f" data-s="`...)
		b = strconv.AppendInt(b, int64(fr.section), 10)
		b = append(b, `" data-v="`...)
		b = strconv.AppendUint(b, fr.value, 10)
		b = append(b, `"><title>`...)
		b = appendXML(b, fr.Name)
		b = append(b, " ("...)
		b = append(b, formatMillis(fr.value)...)
		b = append(b, " ms, "...)
		b = strconv.AppendFloat(b, float64(fr.value)*100/total, 'f', 1, 64)
		b = append(b, " %)</title><rect x=\""...)
		b = strconv.AppendFloat(b, x, 'f', 2, 64)
		b = append(b, `" y="`...)
		b = strconv.AppendInt(b, int64(y), 10)
		b = append(b, `" width="`...)
		b = strconv.AppendFloat(b, fw, 'f', 6, 64)
		b = append(b, `" height="`...)
		b = strconv.AppendInt(b, flameRow-1, 10)
		b = append(b, `" rx="2" fill="`...)
		b = appendFlameColor(b, fr.Name, fr.root)
		b = append(b, `"/><text x="`...)
		b = strconv.AppendFloat(b, x+3, 'f', 2, 64)
		b = append(b, `" y="`...)
		b = strconv.AppendInt(b, int64(y+flameRow-5), 10)
		b = append(b, `">`...)
		b = appendXML(b, flameLabel(fr.Name, fw))
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

// flameScript zooms within a thread's section: a clicked frame and its descendants fill the
// width, its ancestors span it dimmed, the section's other frames hide; "Reset zoom" (or the
// thread's frame) goes back. Labels are re-truncated with the same rule as flameLabel. Search
// marks the frames whose name contains a text. Keep it free of "]]>".
const flameScript = `(function () {
  var W = WIDTH, P = PAD, CW = CHARW, E = 1e-9;
  var reset = document.getElementById("reset");
  var fs = Array.prototype.map.call(document.querySelectorAll("g.f"), function (g) {
    var r = g.querySelector("rect"), t = g.querySelector("text"), n = g.querySelector("title").textContent;
    return { g: g, r: r, t: t, name: n.slice(0, n.lastIndexOf(" (")), n: Array.from(n.slice(0, n.lastIndexOf(" ("))),
      s: g.getAttribute("data-s"), v: +g.getAttribute("data-v"),
      x: +r.getAttribute("x"), w: +r.getAttribute("width"), y: +r.getAttribute("y") };
  });
  function label(f, w) {
    var n = Math.floor((w - 6) / CW);
    return n >= f.n.length ? f.n.join("") : n >= 3 ? f.n.slice(0, n - 2).join("") + ".." : "";
  }
  function zoom(z) {
    fs.forEach(function (f) {
      var x = f.x, w = f.w, show = true, dim = false;
      if (z && f.s === z.s && f.y > z.y) {
        show = dim = f.x <= z.x + E && f.x + f.w >= z.x + z.w - E;
        x = P; w = W;
      } else if (z && f.s === z.s) {
        show = f.x >= z.x - E && f.x + f.w <= z.x + z.w + E;
        x = P + (f.x - z.x) * W / z.w; w = f.w * W / z.w;
      }
      f.g.style.display = show ? "" : "none";
      f.g.style.opacity = dim ? "0.6" : "";
      f.r.setAttribute("x", x.toFixed(2));
      f.r.setAttribute("width", w.toFixed(6));
      f.t.setAttribute("x", (x + 3).toFixed(2));
      f.t.textContent = label(f, w);
    });
    reset.style.display = z ? "" : "none";
  }
  // search marks the frames whose name contains term; the share counts a frame's time once
  // even when an ancestor matches too (frames come parents first, so a stack of open ancestors
  // per section says whether one matched).
  function search(term) {
    var n = 0, v = 0, tot = 0, open = [];
    fs.forEach(function (f, i) {
      var hit = !!term && f.name.indexOf(term) >= 0;
      f.g.classList.toggle("hit", hit);
      if (i === 0 || fs[i - 1].s !== f.s) { tot += f.v; open = []; }
      while (open.length && !(open[open.length - 1].y > f.y && open[open.length - 1].x <= f.x + E &&
          open[open.length - 1].x + open[open.length - 1].w >= f.x + f.w - E)) { open.pop(); }
      var covered = open.some(function (a) { return a.hit; });
      f.hit = hit;
      open.push(f);
      if (hit) { n++; if (!covered) { v += f.v; } }
    });
    document.getElementById("matched").textContent = term ? n + " frames matched, " + (tot ? (100 * v / tot).toFixed(1) : "0") + " % of the time" : "";
    return n;
  }
  window.flameSearch = search;
  fs.forEach(function (f) {
    f.g.style.cursor = "pointer";
    f.g.addEventListener("click", function () { zoom(f); });
  });
  reset.addEventListener("click", function () { zoom(null); });
  document.getElementById("search").addEventListener("click", function () {
    var term = window.prompt("Search frames whose name contains:", "");
    if (term !== null) { search(term); }
  });
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
