package tracer

import (
	"fmt"
	"sort"
	"strings"
)

// formatExtensions are the output file name endings each format owns (Registry's), longest
// first, so that one that ends another matches first (.speedscope.json before .json).
var formatExtensions = func() []struct{ ext, format string } {
	var es []struct{ ext, format string }
	for _, f := range Registry {
		for _, e := range f.Extensions {
			es = append(es, struct{ ext, format string }{e, f.Name})
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return len(es[i].ext) > len(es[j].ext) })
	return es
}()

// StreamExtension is the name ending of the recorder's own stream files.
const StreamExtension = ".mtrace"

// WithPID is path with "."+pid before its format's extension (trace.speedscope.json becomes
// trace.1234.speedscope.json), or at its end when no format owns its extension: the name a
// process's output takes when the plain name belongs to another process.
func WithPID(path string, pid int) string {
	p := strings.ToLower(path)
	for _, e := range append(formatExtensions, struct{ ext, format string }{StreamExtension, "stream"}) {
		if strings.HasSuffix(p, e.ext) && len(p) > len(e.ext) {
			n := len(path) - len(e.ext)
			return fmt.Sprintf("%s.%d%s", path[:n], pid, path[n:])
		}
	}
	return fmt.Sprintf("%s.%d", path, pid)
}

// KnownExtensions lists the output name endings FormatFor accepts, for messages, in
// Registry's order.
func KnownExtensions() string {
	var s []string
	for _, f := range Registry {
		for _, e := range f.Extensions {
			s = append(s, e+" ("+f.Name+")")
		}
	}
	return strings.Join(s, ", ")
}

// FormatFor is the format an output file name's extension names (case-insensitive), or an
// error when no format owns it (no default for an unknown name). A .mtrace name is the
// recorder's stream, which no converter writes.
func FormatFor(path string) (string, error) {
	p := strings.ToLower(path)
	for _, e := range formatExtensions {
		if strings.HasSuffix(p, e.ext) {
			return e.format, nil
		}
	}
	if strings.HasSuffix(p, StreamExtension) {
		return "", fmt.Errorf("%s: .mtrace is the recorder's stream format, not an output format; name the output after its format: %s", path, KnownExtensions())
	}
	return "", fmt.Errorf("%s: no output format has this extension; use one of %s", path, KnownExtensions())
}

// CheckOutputName checks that an output written in format may be called path: a name whose
// extension belongs to another format, or a .mtrace name, is refused; any other name (or "-",
// standard output) is taken as the caller asked.
func CheckOutputName(path, format string) error {
	if path == "-" {
		return nil
	}
	if strings.HasSuffix(strings.ToLower(path), StreamExtension) {
		return fmt.Errorf("%s: .mtrace is the recorder's stream format; a %s output needs another name (%s)", path, format, Extension(format))
	}
	if f, err := FormatFor(path); err == nil && f != format {
		return fmt.Errorf("%s names the %s format, not %s (%s)", path, f, format, Extension(format))
	}
	return nil
}
