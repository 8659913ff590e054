package machobind

import "strings"

// SymbolKeys returns the symbol-table spellings a user-given name matches. A name that starts
// with "_" is a Mach-O symbol name and matches only itself; any other name is a C name and
// matches its Mach-O spelling ("objc_msgSend" -> "_objc_msgSend") and, for the few symbols
// that have no underscore (dyld_stub_binder), itself.
func SymbolKeys(name string) []string {
	if strings.HasPrefix(name, "_") {
		return []string{name}
	}
	return []string{"_" + name, name}
}

// NameSet maps symbol-table names to the index of the user name they came from, so that a slot
// is matched with one map lookup whatever the number of names.
type NameSet map[string]int

// NewNameSet builds the lookup for a list of user-given names.
func NewNameSet(names ...string) NameSet {
	m := make(NameSet, 2*len(names))
	for i, n := range names {
		for _, k := range SymbolKeys(n) {
			if _, dup := m[k]; !dup {
				m[k] = i
			}
		}
	}
	return m
}

// Lookup returns the index of the name that a symbol-table name matches.
func (m NameSet) Lookup(symbol []byte) (int, bool) {
	i, ok := m[string(symbol)] // no allocation: the compiler keys the map with the bytes
	return i, ok
}

// namePrefixes is the set of the first two bytes of some names (a name of one byte: that
// byte and 0, as it is followed in a string table).
type namePrefixes [1 << 16 / 64]uint64

// prefixes returns the first two bytes of the set's names.
func (m NameSet) prefixes() *namePrefixes {
	var p namePrefixes
	for k := range m {
		var a, b byte
		if len(k) > 0 {
			a = k[0]
		}
		if len(k) > 1 {
			b = k[1]
		}
		i := uint(a)<<8 | uint(b)
		p[i/64] |= 1 << (i % 64)
	}
	return &p
}

func (p *namePrefixes) has(a, b byte) bool {
	i := uint(a)<<8 | uint(b)
	return p[i/64]&(1<<(i%64)) != 0
}
