package engine

import "sync"

// Method is a method's number in a conversion's name table (Names): the same for every call
// of the method, whatever stream the call came from. 0 is none: a Call made without a table,
// whose Name is all there is.
type Method int32

// Names is a conversion's table of method names, owned by the engine: every method of every
// stream read (or of a raw dump's), numbered once (the same name in two streams is one
// Method), with the name as a person reads it (DisplayName). What a sink makes once per
// method (a JSON string, an interned id, a frame, a trie's name) it keeps by the Method a Call
// carries, in a slice, instead of hashing names.
type Names struct {
	mu     sync.Mutex
	byName map[string]Method
	names  []methodName // by Method; [0]: none
}

type methodName struct{ name, display string }

func newNames() *Names {
	return &Names{byName: map[string]Method{}, names: []methodName{{}}}
}

// intern returns name's Method, numbering it when new.
func (n *Names) intern(name string) Method {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.byName[name]
	if !ok {
		m = Method(len(n.names))
		n.byName[name] = m
		n.names = append(n.names, methodName{name, DisplayName(name)})
	}
	return m
}

// Name is a method's name as the runtime calls it.
func (n *Names) Name(m Method) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.names[m].name
}

// Display is a method's name as a person reads it (DisplayName).
func (n *Names) Display(m Method) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.names[m].display
}

// Display is the call's method's name as a person reads it (DisplayName), from the name
// table when the call has one.
func (c *Call) Display() string {
	if c.Method != 0 && c.names != nil {
		return c.names.Display(c.Method)
	}
	return DisplayName(c.Name)
}

// Grow returns s with at least m+1 elements (a slice a sink keeps per Method).
func Grow[T any](s []T, m Method) []T {
	if int(m) < len(s) {
		return s
	}
	return append(s, make([]T, int(m)+1-len(s))...)
}
