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
