package swiftname

// The first ("old") mangling of a type, after "_Tt": the grammar of Swift's OldMangling.rst
// for the types a runtime name holds. Modules, classes, structs, enums and protocols are
// substitution candidates in the order they end; S_ is the first, S0_ the second, Sn_ the
// (n+2)th.

type oldParser struct {
	s     string
	i     int
	subst []*node
	depth int
}

func (p *oldParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *oldParser) next(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// enter counts one more level of nesting; false past maxDepth.
func (p *oldParser) enter() bool {
	p.depth++
	return p.depth <= maxDepth
}

func (p *oldParser) leave() { p.depth-- }

// runtimeName is what follows "_Tt": one type.
func (p *oldParser) runtimeName() *node {
	return p.typ()
}

func (p *oldParser) natural() (n int, ok bool) {
	n, p.i, ok = readNatural(p.s, p.i)
	return n, ok
}

// readNatural reads the decimal number at s[i:] (at most 2^20: a length or an index in a name,
// never more), and where it ends; ok is false when there is no digit or it is larger.
func readNatural(s string, i int) (n, end int, ok bool) {
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		if n > 1<<20 {
			return 0, i, false
		}
		i++
	}
	return n, i, i > start
}

// index is '_' (0) or a natural and '_' (natural+1).
func (p *oldParser) index() (int, bool) {
	if p.next('_') {
		return 0, true
	}
	n, ok := p.natural()
	if !ok || !p.next('_') {
		return 0, false
	}
	return n + 1, true
}

// identifier is a length and that many bytes, punycode after 'X'.
func (p *oldParser) identifier() (string, bool) {
	puny := p.next('X')
	n, ok := p.natural()
	if !ok || n == 0 || n > len(p.s)-p.i {
		return "", false
	}
	id := p.s[p.i : p.i+n]
	p.i += n
	if puny {
		return decodePunycode(id)
	}
	return id, true
}

// substitution follows an 'S': a standard type or module, or an earlier entity.
func (p *oldParser) substitution() *node {
	c := p.peek()
	switch c {
	case 'o':
		p.i++
		return &node{k: kModule, text: "__C"}
	case 'C':
		p.i++
		return &node{k: kModule, text: "__C_Synthesized"}
	case 's': // Swift 1's spelling of the standard library module
		p.i++
		return swiftModule
	}
	if name, k := oldStandard(c); name != "" {
		p.i++
		return swiftType(k, name)
	}
	i, ok := p.index()
	if !ok || i >= len(p.subst) {
		return nil
	}
	return p.subst[i]
}

// oldStandard is the type an old-mangling standard substitution letter stands for.
func oldStandard(c byte) (string, byte) {
	switch c {
	case 'a':
		return "Array", 'V'
	case 'b':
		return "Bool", 'V'
	case 'c':
		return "UnicodeScalar", 'V'
	case 'd':
		return "Double", 'V'
	case 'f':
		return "Float", 'V'
	case 'i':
		return "Int", 'V'
	case 'V':
		return "UnsafeRawPointer", 'V'
	case 'v':
		return "UnsafeMutableRawPointer", 'V'
	case 'P':
		return "UnsafePointer", 'V'
	case 'p':
		return "UnsafeMutablePointer", 'V'
	case 'q':
		return "Optional", 'O'
	case 'Q':
		return "ImplicitlyUnwrappedOptional", 'O'
	case 'R':
		return "UnsafeBufferPointer", 'V'
	case 'r':
		return "UnsafeMutableBufferPointer", 'V'
	case 'S':
		return "String", 'V'
	case 'u':
		return "UInt", 'V'
	}
	return "", 0
}

func (p *oldParser) module() *node {
	if p.next('s') {
		return swiftModule
	}
	if p.next('S') {
		m := p.substitution()
		if m == nil || m.k != kModule {
			return nil
		}
		return m
	}
	id, ok := p.identifier()
	if !ok {
		return nil
	}
	m := &node{k: kModule, text: id}
	p.subst = append(p.subst, m)
	return m
}

// declName is an identifier, a local name ('L' index identifier) or a file-private one ('P'
// discriminator identifier).
func (p *oldParser) declName(n *node) bool {
	switch {
	case p.next('L'):
		i, ok := p.index()
		if !ok {
			return false
		}
		id, ok := p.identifier()
		if !ok {
			return false
		}
		n.name = &node{k: kLocal, text: id, num: i}
	case p.next('P'):
		d, ok := p.identifier()
		if !ok {
			return false
		}
		id, ok := p.identifier()
		if !ok {
			return false
		}
		n.name = &node{k: kPrivate, text: id, disc: d}
	default:
		id, ok := p.identifier()
		if !ok {
			return false
		}
		n.text = id
	}
	return true
}

// declaration is a context and a decl name, for a nominal type of kind k.
func (p *oldParser) declaration(k byte) *node {
	ctx := p.context()
	if ctx == nil {
		return nil
	}
	n := &node{k: kNominal, nomK: k, kids: []*node{ctx}}
	if !p.declName(n) {
		return nil
	}
	p.subst = append(p.subst, n)
	return n
}

// context is a module or an enclosing nominal type (functions, extensions and closures as
// contexts are not read).
func (p *oldParser) context() *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	switch c := p.peek(); c {
	case 0:
		return nil
	case 'S':
		p.i++
		return p.substitution()
	case 's':
		p.i++
		return swiftModule
	case 'G':
		p.i++
		return p.boundGeneric()
	case 'C', 'V', 'O':
		p.i++
		return p.declaration(c)
	case 'F':
		p.i++
		return p.function()
	case 'Z':
		p.i++
		if !p.next('F') {
			return nil
		}
		return p.function()
	case 'E', 'e', 'I', 'v', 'P', 'i':
		return nil
	}
	return p.module()
}

// function follows 'F' in a context: a function that encloses a local type, a context, a name
// and a function type; shown by its name and argument labels, "makeVisitor(file:)".
func (p *oldParser) function() *node {
	ctx := p.context()
	if ctx == nil {
		return nil
	}
	n := &node{k: kFunc, kids: []*node{ctx}}
	if !p.declName(n) {
		return nil
	}
	t := p.typ()
	if t == nil || t.k != kFunction || len(t.kids) != 2 {
		return nil
	}
	if arg := t.kids[0]; arg.k == kTuple {
		for i := range arg.kids {
			l := "_"
			if i < len(arg.labels) && arg.labels[i] != "" {
				l = arg.labels[i]
			}
			n.labels = append(n.labels, l)
		}
	} else {
		n.labels = []string{"_"}
	}
	return n
}

func (p *oldParser) nominal() *node {
	switch c := p.peek(); c {
	case 'S':
		p.i++
		return p.substitution()
	case 'C', 'V', 'O', 'P':
		p.i++
		return p.declaration(c)
	}
	return nil
}

// boundGeneric follows 'G': a nominal type, then for each level of nesting from the
// outermost, its arguments and '_'.
func (p *oldParser) boundGeneric() *node {
	n := p.nominal()
	if n == nil || !n.isNominal() {
		return nil
	}
	return p.boundArgs(n)
}

func (p *oldParser) boundArgs(n *node) *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	if n == nil || n.k != kNominal || len(n.kids) != 1 {
		return nil
	}
	parent := n.kids[0]
	if parent.k != kModule {
		np := p.boundArgs(parent)
		if np == nil {
			return nil
		}
		c := *n
		c.kids = []*node{np}
		n = &c
	}
	var args []*node
	for !p.next('_') {
		t := p.typ()
		if t == nil || p.i >= len(p.s) {
			return nil
		}
		args = append(args, t)
	}
	if len(args) == 0 {
		return n
	}
	if n.nomK != 'C' && n.nomK != 'V' && n.nomK != 'O' {
		return nil
	}
	return &node{k: kBound, kids: append([]*node{n}, args...)}
}

// protocolName is one protocol of a protocol list.
func (p *oldParser) protocolName() *node {
	if p.next('S') {
		sub := p.substitution()
		if sub == nil {
			return nil
		}
		if sub.k == kNominal && sub.nomK == 'P' {
			return sub
		}
		if sub.k != kModule {
			return nil
		}
		return p.protocolIn(sub)
	}
	if p.next('s') {
		return p.protocolIn(swiftModule)
	}
	return p.declaration('P')
}

func (p *oldParser) protocolIn(ctx *node) *node {
	n := &node{k: kNominal, nomK: 'P', kids: []*node{ctx}}
	if !p.declName(n) {
		return nil
	}
	p.subst = append(p.subst, n)
	return n
}

func (p *oldParser) protocolList() *node {
	l := &node{k: kProtoList}
	for !p.next('_') {
		pr := p.protocolName()
		if pr == nil {
			return nil
		}
		l.kids = append(l.kids, pr)
	}
	return l
}

func (p *oldParser) tuple() *node {
	t := &node{k: kTuple}
	for !p.next('_') {
		if p.i >= len(p.s) {
			return nil
		}
		label := ""
		if c := p.peek(); c >= '0' && c <= '9' || c == 'X' && p.i+1 < len(p.s) && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9' {
			id, ok := p.identifier()
			if !ok {
				return nil
			}
			label = id
		}
		e := p.typ()
		if e == nil {
			return nil
		}
		t.kids = append(t.kids, e)
		t.labels = append(t.labels, label)
	}
	return t
}

func (p *oldParser) functionType() *node {
	f := &node{k: kFunction}
	if p.next('z') {
		f.text = "throws"
	}
	p.next('y')
	if p.next('Z') {
		f.text = joinWords("async", f.text)
	}
	if p.peek() == 'D' || p.peek() == 'Y' {
		return nil
	}
	in := p.typ()
	if in == nil {
		return nil
	}
	out := p.typ()
	if out == nil {
		return nil
	}
	f.kids = []*node{in, out}
	return f
}

func joinWords(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}

func (p *oldParser) builtinSize() (int, bool) {
	n, ok := p.natural()
	if !ok || !p.next('_') {
		return 0, false
	}
	return n, true
}

func (p *oldParser) builtin() *node {
	c := p.peek()
	p.i++
	name := ""
	switch c {
	case 'b':
		name = "Builtin.BridgeObject"
	case 'B':
		name = "Builtin.UnsafeValueBuffer"
	case 'O':
		name = "Builtin.UnknownObject"
	case 'o':
		name = "Builtin.NativeObject"
	case 'p':
		name = "Builtin.RawPointer"
	case 'w':
		name = "Builtin.Word"
	case 'i', 'f':
		n, ok := p.builtinSize()
		if !ok {
			return nil
		}
		if c == 'i' {
			name = "Builtin.Int" + itoa(n)
		} else {
			name = "Builtin.FPIEEE" + itoa(n)
		}
	default:
		return nil
	}
	return &node{k: kText, text: name}
}

// typ is one type.
func (p *oldParser) typ() *node {
	if !p.enter() || p.i >= len(p.s) {
		p.leave()
		return nil
	}
	defer p.leave()
	c := p.s[p.i]
	p.i++
	switch c {
	case 'B':
		return p.builtin()
	case 'a':
		return p.declaration('a')
	case 'F', 'f', 'b', 'c', 'K':
		return p.functionType()
	case 'G':
		return p.boundGeneric()
	case 'M':
		t := p.typ()
		if t == nil {
			return nil
		}
		return &node{k: kMetatype, kids: []*node{t}}
	case 'P':
		if p.next('M') {
			t := p.typ()
			if t == nil {
				return nil
			}
			return &node{k: kExMetatype, kids: []*node{t}}
		}
		return p.protocolList()
	case 'R':
		t := p.typ()
		if t == nil {
			return nil
		}
		return &node{k: kInOut, kids: []*node{t}}
	case 'S':
		t := p.substitution()
		if t == nil || t.k == kModule {
			return nil
		}
		return t
	case 'T':
		return p.tuple()
	case 'x':
		return &node{k: kText, text: "A"}
	case 'C', 'V', 'O':
		return p.declaration(c)
	}
	return nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
