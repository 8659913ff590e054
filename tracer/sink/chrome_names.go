// Names in the Chrome JSON sink (chrome.go): each name made a JSON string once (by its Method
// for a call), with the heads of a call's begin and end up to their time; appendJSONString.

package sink

import (
	"unicode/utf8"

	"github.com/msgtrace/msgtrace/tracer/engine"
)

// jsonNames keeps names as JSON strings: a call's by its Method, other names (and calls
// without a Method) by name.
type jsonNames struct {
	byMethod []*jsonName
	byName   map[string]*jsonName
}

// call returns the entry of a call's method.
func (c *jsonNames) call(call *engine.Call) *jsonName {
	m := call.Method
	if m == 0 {
		return c.entry(call.Name)
	}
	if int(m) < len(c.byMethod) {
		if e := c.byMethod[m]; e != nil {
			return e
		}
	}
	c.byMethod = engine.Grow(c.byMethod, m)
	e := c.byName[call.Name]
	if e == nil {
		e = c.make(call.Name, call.Display())
	}
	c.byMethod[m] = e
	return e
}

// append appends name as a JSON string (appendJSONString).
func (c *jsonNames) append(b []byte, name string) []byte {
	if len(name) == 0 {
		return append(b, `""`...)
	}
	return append(b, c.entry(name).q...)
}

// jsonName is a jsonNames entry: the name, as a JSON string (q), and the head of a begin (b)
// and of an end (e) of a call of it up to its time, after the separator between events.
type jsonName struct {
	s       string
	q, b, e []byte
}

// entry returns name's entry, made if it is not there.
func (c *jsonNames) entry(name string) *jsonName {
	if len(name) == 0 {
		return &emptyName
	}
	if e := c.byName[name]; e != nil {
		return e
	}
	return c.make(name, engine.DisplayName(name))
}

// make makes the entry of a name whose display name is d.
func (c *jsonNames) make(name, d string) *jsonName {
	e := new(jsonName)
	c.byName[name] = e
	e.s, e.q = name, appendJSONString(nil, d)
	e.b = callHeadOf(nil, 'B', e.q)
	if d != name {
		// a Swift class's method: named as people write it, its runtime name (what
		// identifies it, and what the Objective-C runtime calls it) kept in the begin's
		// args, the same for every call of it (speedscope keys frames by name and args)
		e.b = e.b[:len(e.b)-len(`,"ts":`)]
		e.b = append(e.b, `,"args":{"objc":`...)
		e.b = appendJSONString(e.b, name)
		e.b = append(e.b, `},"ts":`...)
	}
	e.e = callHeadOf(nil, 'E', e.q)
	return e
}

var emptyName = func() jsonName {
	q := []byte(`""`)
	return jsonName{q: q, b: callHeadOf(nil, 'B', q), e: callHeadOf(nil, 'E', q)}
}()

func callHeadOf(b []byte, ph byte, q []byte) []byte {
	b = append(b, ",\n"+`{"ph":"`...)
	b = append(b, ph)
	b = append(b, `","name":`...)
	b = append(b, q...)
	return append(b, `,"ts":`...)
}

// appendJSONString appends s as a JSON string (strconv.AppendQuote's \x escapes are not JSON).
// Runs of plain bytes are copied at once; control characters are escaped and invalid UTF-8
// becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
