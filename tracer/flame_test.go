package tracer

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

type flameSVG struct {
	Width  int        `xml:"width,attr"`
	Height int        `xml:"height,attr"`
	Texts  []string   `xml:"text"`
	Frames []flameBox `xml:"g"`
}

type flameBox struct {
	Class string `xml:"class,attr"`
	Title string `xml:"title"`
	Rect  struct {
		X      float64 `xml:"x,attr"`
		Y      float64 `xml:"y,attr"`
		Width  float64 `xml:"width,attr"`
		Height float64 `xml:"height,attr"`
		Fill   string  `xml:"fill,attr"`
	} `xml:"rect"`
	Label string `xml:"text"`
}

// name is the frame's name: its tooltip without " (1.234 ms, 5.6 %)".
func (b flameBox) name() string { return b.Title[:strings.LastIndex(b.Title, " (")] }

// parseFlame checks that out is well-formed XML (strictly, token by token) and decodes it.
func parseFlame(t testing.TB, out []byte) flameSVG {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(out))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, out)
		}
	}
	var s flameSVG
	if err := xml.Unmarshal(out, &s); err != nil {
		t.Fatalf("unmarshal: %v\n%s", err, out)
	}
	return s
}

// flameOut runs a raw dump through a FlameSink.
func flameOut(t testing.TB, raw []byte, opt engine.Options, title string) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(raw), opt, sink.NewFlameSink(&out, title)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// rawTrace writes a dump with these names and one thread per tree list.
func rawTrace(t testing.TB, names []stream.NameEntry, threads ...[]node) []byte {
	var buf bytes.Buffer
	w := stream.NewWriter(&buf, stream.Header{PID: 1, TickNum: 1, TickDen: 1})
	w.WriteNames(names)
	for i, roots := range threads {
		var recs []stream.Record
		for _, n := range roots {
			n.records(0, &recs)
		}
		w.WriteThread(stream.Thread{TID: uint64(i + 1), Main: i == 0}, recs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFlameWidths checks every frame of testTrace against widths worked out by hand, one
// section per thread. Main thread: -[Foo run] 100 µs (self 30), -[Bar step:] 25+40 µs of self,
// -[Bar tiny] 5 µs, +[Foo run] 10 µs: 110 µs. Worker: -[Bar step:] 20 µs, all of it on the
// "[unwound]" frame since an exception unwound it.
func TestFlameWidths(t *testing.T) {
	s := parseFlame(t, flameOut(t, testTrace(t), engine.Options{MaxDepth: -1}, "test"))
	const inner = 1200 - 20
	type want struct {
		title      string
		bottom     int
		depth      int
		off, value float64
		total      float64
		label      string
	}
	const b0, b1 = 54 + 4*16, 54 + 4*16 + 24 + 3*16
	wants := []want{ // per thread, pre-order, siblings sorted: '+' < '-', "Bar" < "Foo"
		{"main (0.110 ms, 100.0 %)", b0, 0, 0, 110000, 110000, "main"},
		{"+[Foo run] (0.010 ms, 9.1 %)", b0, 1, 0, 10000, 110000, "+[Foo run]"},
		{"-[Foo run] (0.100 ms, 90.9 %)", b0, 1, 10000, 100000, 110000, "-[Foo run]"},
		{"-[Bar step:] (0.070 ms, 63.6 %)", b0, 2, 10000, 70000, 110000, "-[Bar step:]"},
		{"-[Bar tiny] (0.005 ms, 4.5 %)", b0, 3, 10000, 5000, 110000, "-[Ba.."}, // 53.6 px: 6 characters
		{"worker (0.020 ms, 100.0 %)", b1, 0, 0, 20000, 20000, "worker"},
		{"-[Bar step:] (0.020 ms, 100.0 %)", b1, 1, 0, 20000, 20000, "-[Bar step:]"},
		{"[unwound] (0.020 ms, 100.0 %)", b1, 2, 0, 20000, 20000, "[unwound]"},
	}
	if s.Width != 1200 || s.Height != b1+10 {
		t.Errorf("size %dx%d", s.Width, s.Height)
	}
	if len(s.Frames) != len(wants) {
		t.Fatalf("%d frames, want %d: %+v", len(s.Frames), len(wants), s.Frames)
	}
	for i, w := range wants {
		f := s.Frames[i]
		x, wd := 10+w.off/w.total*inner, w.value/w.total*inner
		y := float64(w.bottom - (w.depth+1)*16)
		if f.Class != "f" || f.Title != w.title || f.Label != w.label ||
			math.Abs(f.Rect.X-x) > 0.006 || math.Abs(f.Rect.Width-wd) > 0.006 || f.Rect.Y != y || f.Rect.Height != 15 {
			t.Errorf("frame %d: %q %q x=%v w=%v y=%v h=%v, want %q %q x=%.3f w=%.3f y=%v",
				i, f.Title, f.Label, f.Rect.X, f.Rect.Width, f.Rect.Y, f.Rect.Height, w.title, w.label, x, wd, y)
		}
		if !strings.HasPrefix(f.Rect.Fill, "rgb(") {
			t.Errorf("frame %d fill %q", i, f.Rect.Fill)
		}
	}
	// same name, same colour; the palette is warm: red high, blue low
	if s.Frames[3].Rect.Fill != s.Frames[6].Rect.Fill || s.Frames[2].Rect.Fill == s.Frames[3].Rect.Fill {
		t.Errorf("colours: %q %q %q", s.Frames[3].Rect.Fill, s.Frames[6].Rect.Fill, s.Frames[2].Rect.Fill)
	}
	for _, f := range s.Frames {
		if f.Rect.Fill == "rgb(200,200,200)" { // a thread's frame
			continue
		}
		var r, g, b int
		parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(f.Rect.Fill, "rgb("), ")"), ",")
		r, _ = strconv.Atoi(parts[0])
		g, _ = strconv.Atoi(parts[1])
		b, _ = strconv.Atoi(parts[2])
		if r < 200 || b > 60 || g < b {
			t.Errorf("%s: colour %q is not warm", f.Title, f.Rect.Fill)
		}
	}
	if s.Texts[0] != "test" || !strings.Contains(s.Texts[1], "0.130 ms") || !strings.Contains(s.Texts[1], "6 calls") {
		t.Errorf("heading: %q", s.Texts)
	}
}

// TestFlameNarrow: frames of any width stay in the file (zooming reaches them) (past the cap
// the narrowest go: the sink's TestFlameFramesCap).
func TestFlameNarrow(t *testing.T) {
	raw := rawTrace(t, testNames, []node{
		{cls: clsFoo, sel: selRun, start: 0, end: 1000000, kids: []node{
			{cls: clsBar, sel: selStep, start: 100, end: 101},   // 1 ns: 0.0001%
			{cls: clsBar, sel: selTiny, start: 2000, end: 3000}, // 1000 ns: 0.1%
		}},
	})
	s := parseFlame(t, flameOut(t, raw, engine.Options{MaxDepth: -1}, "narrow"))
	got := map[string]flameBox{}
	for _, f := range s.Frames {
		got[f.name()] = f
	}
	if len(s.Frames) != 4 {
		t.Fatalf("frames: %+v", s.Frames)
	}
	if f := got["-[Bar step:]"]; f.Label != "" || math.Abs(f.Rect.Width-0.00118) > 1e-6 {
		t.Errorf("-[Bar step:]: %+v", f)
	}
	if f := got["-[Bar tiny]"]; f.Title != "-[Bar tiny] (0.001 ms, 0.1 %)" || f.Label != "" || math.Abs(f.Rect.Width-1.18) > 0.006 {
		t.Errorf("-[Bar tiny]: %+v", f)
	}
}

func TestFlameEscaping(t *testing.T) {
	names := []stream.NameEntry{
		{Key: 0x4000, Kind: stream.NameClass, Name: `A<b>&"c'`}, {Key: 0x5000, Kind: stream.NameMetaclass, Name: "Bad\xff\x01Name"},
		{Key: 0x40, Kind: stream.NameSelector, Name: "x:<y>&z:"}, {Key: 0x50, Kind: stream.NameSelector, Name: "tab\there"},
	}
	raw := rawTrace(t, names, []node{
		{cls: 0x4000, sel: 0x40, start: 0, end: 1000, kids: []node{{cls: 0x5000, sel: 0x50, start: 100, end: 900}}},
	})
	out := flameOut(t, raw, engine.Options{MaxDepth: -1}, `title <&> "q"`)
	if bytes.Contains(out, []byte("<b>")) || bytes.Contains(out, []byte("<y>")) || bytes.Contains(out, []byte("\xff")) ||
		!bytes.Contains(out, []byte("A&lt;b&gt;&amp;&#34;c&#39; x:&lt;y&gt;&amp;z:")) {
		t.Errorf("not escaped:\n%s", out)
	}
	s := parseFlame(t, out)
	if s.Texts[0] != `title <&> "q"` {
		t.Errorf("title %q", s.Texts[0])
	}
	if len(s.Frames) != 3 || s.Frames[1].name() != `-[A<b>&"c' x:<y>&z:]` || s.Frames[1].Label != s.Frames[1].name() ||
		s.Frames[2].name() != "+[Bad\ufffd\ufffdName tab\there]" {
		t.Errorf("frames: %+v", s.Frames)
	}
}

func TestFlameEmpty(t *testing.T) {
	for _, c := range []struct {
		raw  []byte
		opt  engine.Options
		want string
	}{
		{rawTrace(t, testNames), engine.Options{MaxDepth: -1}, "no calls"},
		{testTrace(t), engine.Options{MaxDepth: -1, Include: []string{"-[Nothing *]"}}, "no calls"},
		{rawTrace(t, testNames, []node{{cls: clsFoo, sel: selRun, start: 5, end: 5}}), engine.Options{MaxDepth: -1}, "no measurable time in 1 calls"},
	} {
		out := flameOut(t, c.raw, c.opt, "empty")
		s := parseFlame(t, out)
		if len(s.Frames) != 0 || len(s.Texts) != 2 || s.Texts[0] != "empty" || s.Texts[1] != c.want || s.Width != 1200 {
			t.Errorf("want %q:\n%s", c.want, out)
		}
	}
}

// TestFlameDeterministic: many siblings and several threads, so that map order would show.
func TestFlameDeterministic(t *testing.T) {
	names := append([]stream.NameEntry(nil), testNames...)
	var kids []node
	for i := uint64(0); i < 40; i++ {
		names = append(names, stream.NameEntry{Key: 0x1000 + i, Kind: stream.NameSelector, Name: "sel" + strconv.FormatUint(i*7%40, 10) + ":"})
		kids = append(kids, node{cls: clsBar, sel: 0x1000 + i, start: 10 + i*100, end: 60 + i*100 + i%3,
			kids: []node{{cls: clsFoo, sel: 0x1000 + (i*3)%40, start: 20 + i*100, end: 40 + i*100}}})
	}
	roots := []node{{cls: clsFoo, sel: selRun, start: 0, end: 5000, kids: kids}}
	raw := rawTrace(t, names, roots, roots, []node{{cls: clsFooMeta, sel: selStep, start: 0, end: 3000}})
	first := flameOut(t, raw, engine.Options{MaxDepth: -1}, "det")
	s := parseFlame(t, first)
	if len(s.Frames) < 40 {
		t.Fatalf("%d frames", len(s.Frames))
	}
	for i := 0; i < 20; i++ {
		if again := flameOut(t, raw, engine.Options{MaxDepth: -1}, "det"); !bytes.Equal(first, again) {
			t.Fatalf("run %d differs", i)
		}
	}
	// within each row, frames run left to right and do not overlap; names sorted per parent
	byRow := map[float64][]flameBox{}
	for _, f := range s.Frames {
		byRow[f.Rect.Y] = append(byRow[f.Rect.Y], f)
	}
	for y, fs := range byRow {
		for i := 1; i < len(fs); i++ {
			if fs[i].Rect.X < fs[i-1].Rect.X+fs[i-1].Rect.Width-0.011 {
				t.Errorf("row %v: %q overlaps %q", y, fs[i].Title, fs[i-1].Title)
			}
		}
	}
}

// xmlSafe is what an XML reader gets back for s: invalid UTF-8 and characters XML cannot
// hold become U+FFFD.
func xmlSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		ok := r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= 0x10ffff
		if !ok || r == utf8.RuneError && n == 1 {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// FuzzFlameNames: any class and selector names give well-formed XML whose tooltips carry the
// names back.
func FuzzFlameNames(f *testing.F) {
	f.Add(`A<b>&"c'`, "x:]]>y:", "title")
	f.Add("\x00\xff\r\n", "\ufffe", "")
	f.Fuzz(func(t *testing.T, cls, sel, title string) {
		if len(cls) > stream.MaxNameLen || len(sel) > stream.MaxNameLen {
			return
		}
		names := []stream.NameEntry{{Key: 0x4000, Kind: stream.NameClass, Name: cls}, {Key: 0x40, Kind: stream.NameSelector, Name: sel}, {Key: 0x50, Kind: stream.NameSelector, Name: "kid"}}
		raw := rawTrace(t, names, []node{{cls: 0x4000, sel: 0x40, start: 0, end: 1000, kids: []node{{cls: 0x4000, sel: 0x50, start: 10, end: 500}}}})
		s := parseFlame(t, flameOut(t, raw, engine.Options{MaxDepth: -1}, title))
		if s.Texts[0] != xmlSafe(title) {
			t.Errorf("title %q, want %q", s.Texts[0], xmlSafe(title))
		}
		if strings.Contains(cls+sel, ";") { // folded stacks split names at ';'
			return
		}
		if len(s.Frames) != 3 || s.Frames[1].name() != xmlSafe("-["+cls+" "+sel+"]") || s.Frames[2].name() != xmlSafe("-["+cls+" kid]") {
			t.Errorf("frames: %+v", s.Frames)
		}
	})
}

// FuzzFlame: any input that processes without error gives a well-formed SVG.
func FuzzFlame(f *testing.F) {
	f.Add(testTrace(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		if _, err := engine.Process(bytes.NewReader(b), engine.Options{MaxDepth: -1}, sink.NewFlameSink(&out, "fuzz")); err == nil {
			parseFlame(t, out.Bytes())
		}
	})
}
