package swiftname

// The stable mangling (Swift 5, "$s"), for the types a runtime name holds: a postfix
// grammar read with a stack (docs/ABI/Mangling.rst). Identifiers may reuse words of earlier
// identifiers ('0' then letters); identifiers and nominal types are substitution candidates
// ("A" and a letter or an index); "y" opens generic argument lists, "_" starts the next level's
// and "G" closes them; "LL" makes the name before it file-private; "D" ends a type mangling.

const maxWords = 26

type newParser struct {
	s     string
	i     int
	stack []*node
	subst []*node
	words []string
}

// markers on the stack.
var (
	emptyList    = &node{k: kText, text: "<y>"}
	firstElement = &node{k: kText, text: "<_>"}
)

// identNode is an identifier on the stack: a kText node whose disc is "id".
func identNode(s string) *node { return &node{k: kText, text: s, disc: "id"} }

func isIdent(n *node) bool { return n != nil && n.k == kText && n.disc == "id" }

func parseNew(s string) *node {
	p := newParser{s: s}
	for p.i < len(p.s) {
		if len(p.stack) > 4*maxDepth {
			return nil
		}
		c := p.s[p.i]
		if c == 'D' && p.i == len(p.s)-1 {
			p.i++
			break
		}
		p.i++
		if !p.op(c) {
			return nil
		}
	}
	if len(p.stack) != 1 {
		return nil
	}
	n := p.stack[0]
	switch n.k {
	case kNominal:
		if n.nomK == 'P' {
			return &node{k: kProtoList, kids: []*node{n}}
		}
		return n
	case kBound, kOptional:
		return n
	}
	return nil
}

func (p *newParser) push(n *node) { p.stack = append(p.stack, n) }

func (p *newParser) pop() *node {
	if len(p.stack) == 0 {
		return nil
	}
	n := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	return n
}

func (p *newParser) top() *node {
	if len(p.stack) == 0 {
		return nil
	}
	return p.stack[len(p.stack)-1]
}

// isType reports whether n can stand as a type (a generic argument or a context).
func isType(n *node) bool {
	return n != nil && (n.k == kNominal || n.k == kBound || n.k == kOptional)
}

func (p *newParser) op(c byte) bool {
	switch {
	case c >= '0' && c <= '9':
		p.i--
		id, ok := p.identifier()
		if !ok {
			return false
		}
		n := identNode(id)
		p.subst = append(p.subst, n)
		p.push(n)
		return true
	}
	switch c {
	case 'C', 'V', 'O', 'P':
		return p.nominal(c)
	case 's':
		p.push(swiftModule)
		return true
	case 'S':
		return p.standard()
	case 'A':
		return p.multiSubst()
	case 'y':
		p.push(emptyList)
		return true
	case '_':
		p.push(firstElement)
		return true
	case 'G':
		return p.boundGeneric()
	case 'L':
		if p.i < len(p.s) && p.s[p.i] == 'L' {
			p.i++
			d, name := p.pop(), p.pop()
			if !isIdent(d) || !isIdent(name) {
				return false
			}
			p.push(&node{k: kPrivate, text: name.text, disc: d.text})
			return true
		}
	}
	return false
}

// popContext takes a module (an identifier becomes one) or an enclosing nominal type.
func (p *newParser) popContext() *node {
	n := p.pop()
	switch {
	case n == nil:
		return nil
	case isIdent(n):
		return &node{k: kModule, text: n.text}
	case n.k == kModule, n.k == kNominal:
		return n
	}
	return nil
}

func (p *newParser) nominal(k byte) bool {
	name := p.pop()
	ctx := p.popContext()
	if ctx == nil {
		return false
	}
	n := &node{k: kNominal, nomK: k, kids: []*node{ctx}}
	switch {
	case isIdent(name):
		n.text = name.text
	case name != nil && name.k == kPrivate:
		n.name = name
	default:
		return false
	}
	p.subst = append(p.subst, n)
	p.push(n)
	return true
}

func (p *newParser) boundGeneric() bool {
	var lists [][]*node
	for {
		var l []*node
		for isType(p.top()) {
			l = append([]*node{p.pop()}, l...)
		}
		lists = append(lists, l)
		t := p.pop()
		if t == emptyList {
			break
		}
		if t != firstElement {
			return false
		}
	}
	nom := p.pop()
	if nom == nil || nom.k != kNominal {
		return false
	}
	b := bindArgs(nom, lists, 0, 0)
	if b == nil {
		return false
	}
	p.subst = append(p.subst, b)
	p.push(b)
	return true
}

// bindArgs applies lists[i] to nom and the next lists to its enclosing types.
func bindArgs(nom *node, lists [][]*node, i, depth int) *node {
	if i >= len(lists) || depth > maxDepth || nom.k != kNominal || len(nom.kids) != 1 {
		return nil
	}
	args := lists[i]
	ctx := nom.kids[0]
	if i+1 < len(lists) && ctx.k == kNominal {
		bp := bindArgs(ctx, lists, i+1, depth+1)
		if bp == nil {
			return nil
		}
		c := *nom
		c.kids = []*node{bp}
		nom = &c
	} else if i+1 < len(lists) {
		for _, l := range lists[i+1:] {
			if len(l) > 0 {
				return nil
			}
		}
	}
	if len(args) == 0 {
		return nom
	}
	if nom.nomK != 'C' && nom.nomK != 'V' && nom.nomK != 'O' {
		return nil
	}
	return &node{k: kBound, kids: append([]*node{nom}, args...)}
}

// standard follows 'S': a known module, Optional sugar, or a standard type.
func (p *newParser) standard() bool {
	if p.i >= len(p.s) {
		return false
	}
	c := p.s[p.i]
	p.i++
	switch c {
	case 'o':
		p.push(&node{k: kModule, text: "__C"})
		return true
	case 'C':
		p.push(&node{k: kModule, text: "__C_Synthesized"})
		return true
	case 'g':
		t := p.pop()
		if !isType(t) {
			return false
		}
		o := &node{k: kOptional, kids: []*node{t}}
		p.subst = append(p.subst, o)
		p.push(o)
		return true
	}
	p.i--
	repeat, hasRepeat := p.natural()
	if !hasRepeat {
		repeat = 1
	}
	if repeat < 1 || repeat > 2048 || p.i >= len(p.s) {
		return false
	}
	c = p.s[p.i]
	p.i++
	if c == 'c' { // second-level (concurrency) substitutions are not read
		return false
	}
	name, k := newStandard(c)
	if name == "" {
		return false
	}
	for range repeat {
		p.push(swiftType(k, name))
	}
	return true
}

// newStandard is the type a stable-mangling standard substitution letter stands for.
func newStandard(c byte) (string, byte) {
	const v, o, pr = 'V', 'O', 'P'
	switch c {
	case 'A':
		return "AutoreleasingUnsafeMutablePointer", v
	case 'a':
		return "Array", v
	case 'B':
		return "BinaryFloatingPoint", pr
	case 'b':
		return "Bool", v
	case 'D':
		return "Dictionary", v
	case 'd':
		return "Double", v
	case 'E':
		return "Encodable", pr
	case 'e':
		return "Decodable", pr
	case 'F':
		return "FloatingPoint", pr
	case 'f':
		return "Float", v
	case 'G':
		return "RandomNumberGenerator", pr
	case 'H':
		return "Hashable", pr
	case 'h':
		return "Set", v
	case 'I':
		return "DefaultIndices", v
	case 'i':
		return "Int", v
	case 'J':
		return "Character", v
	case 'j':
		return "Numeric", pr
	case 'K':
		return "BidirectionalCollection", pr
	case 'k':
		return "RandomAccessCollection", pr
	case 'L':
		return "Comparable", pr
	case 'l':
		return "Collection", pr
	case 'M':
		return "MutableCollection", pr
	case 'm':
		return "RangeReplaceableCollection", pr
	case 'N':
		return "ClosedRange", v
	case 'n':
		return "Range", v
	case 'O':
		return "ObjectIdentifier", v
	case 'P':
		return "UnsafePointer", v
	case 'p':
		return "UnsafeMutablePointer", v
	case 'Q':
		return "Equatable", pr
	case 'q':
		return "Optional", o
	case 'R':
		return "UnsafeBufferPointer", v
	case 'r':
		return "UnsafeMutableBufferPointer", v
	case 'S':
		return "String", v
	case 's':
		return "Substring", v
	case 'T':
		return "Sequence", pr
	case 't':
		return "IteratorProtocol", pr
	case 'U':
		return "UnsignedInteger", pr
	case 'u':
		return "UInt", v
	case 'V':
		return "UnsafeRawPointer", v
	case 'v':
		return "UnsafeMutableRawPointer", v
	case 'W':
		return "UnsafeRawBufferPointer", v
	case 'w':
		return "UnsafeMutableRawBufferPointer", v
	case 'X':
		return "RangeExpression", pr
	case 'x':
		return "Strideable", pr
	case 'Y':
		return "RawRepresentable", pr
	case 'y':
		return "StringProtocol", pr
	case 'Z':
		return "SignedInteger", pr
	case 'z':
		return "BinaryInteger", pr
	}
	return "", 0
}

// multiSubst follows 'A': lower-case letters (more follow), an upper-case one (the last), each
// after an optional repeat count, or a natural and '_' for an index past 26.
func (p *newParser) multiSubst() bool {
	repeat := -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			last := c <= 'Z'
			idx := int(c - 'a')
			if last {
				idx = int(c - 'A')
			}
			if idx >= len(p.subst) {
				return false
			}
			n := max(repeat, 1)
			if n > 2048 {
				return false
			}
			for range n {
				p.push(p.subst[idx])
			}
			if last {
				return true
			}
			repeat = -1
		case c == '_':
			idx := repeat + 27
			if repeat < 0 || idx >= len(p.subst) {
				return false
			}
			p.push(p.subst[idx])
			return true
		default:
			p.i--
			n, ok := p.natural()
			if !ok {
				return false
			}
			repeat = n
		}
	}
	return false
}

func (p *newParser) natural() (n int, ok bool) {
	n, p.i, ok = readNatural(p.s, p.i)
	return n, ok
}

// identifier reads an identifier: a length and its bytes; "0" and words or literals (word
// substitutions); "00" and a punycode literal.
func (p *newParser) identifier() (string, bool) {
	words, puny := false, false
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
		if p.i < len(p.s) && p.s[p.i] == '0' {
			p.i++
			puny = true
		} else {
			words = true
		}
	}
	var id []byte
	for {
		for words && p.i < len(p.s) && isLetter(p.s[p.i]) {
			c := p.s[p.i]
			p.i++
			var w int
			if c >= 'a' {
				w = int(c - 'a')
			} else {
				w = int(c - 'A')
				words = false
			}
			if w >= len(p.words) {
				return "", false
			}
			id = append(id, p.words[w]...)
		}
		if p.i < len(p.s) && p.s[p.i] == '0' {
			p.i++
			break
		}
		n, ok := p.natural()
		if !ok || n <= 0 {
			return "", false
		}
		if puny && p.i < len(p.s) && p.s[p.i] == '_' {
			p.i++
		}
		if n > len(p.s)-p.i {
			return "", false
		}
		slice := p.s[p.i : p.i+n]
		p.i += n
		if puny {
			d, ok := decodePunycode(slice)
			if !ok {
				return "", false
			}
			id = append(id, d...)
		} else {
			id = append(id, slice...)
			p.addWords(slice)
		}
		if !words {
			break
		}
	}
	if len(id) == 0 {
		return "", false
	}
	return string(id), true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// addWords records the words of a literal for later word substitutions: a word starts at a
// byte that is not a digit or '_' and ends before '_', the end, or an upper-case letter after a
// non-upper-case one; only words of two bytes or more count.
func (p *newParser) addWords(s string) {
	start := -1
	for i := 0; i <= len(s); i++ {
		var c byte
		if i < len(s) {
			c = s[i]
		}
		if start >= 0 && (c == '_' || c == 0 || (c >= 'A' && c <= 'Z' && !(s[i-1] >= 'A' && s[i-1] <= 'Z'))) {
			if i-start >= 2 && len(p.words) < maxWords {
				p.words = append(p.words, s[start:i])
			}
			start = -1
		}
		if start < 0 && c != 0 && c != '_' && !(c >= '0' && c <= '9') {
			start = i
		}
	}
}
