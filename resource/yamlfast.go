package resource

// This file reads the YAML most resources are written in — block
// mappings and sequences of one-line scalars — straight into JSON,
// without go.yaml.in/yaml/v3's parser and its nodes, which took three
// quarters of the time of a block-style document (BENCHMARKS.md, "YAML at
// JSON speed"). It writes the same JSON and the same marks as the node
// path (yamlConv) for what it takes, and takes only what it is sure to
// read as go.yaml.in/yaml/v3 does: anything else — flow collections
// other than {} and [], anchors, aliases, tags, merge keys, block and
// multi-line scalars, escapes beyond \\ \" \n \t, tabs, carriage
// returns, bytes outside printable ASCII, an empty value, a repeated key,
// and every error — goes to the node path, which reads and reports it as
// always. TestYAMLFastPathMatchesNodes and FuzzYAMLFastPath hold the two
// to the same output.

import "sync"

// maxFastDepth bounds how deeply the fast path nests (a document nesting
// deeper takes the node path, which has its own bound).
const maxFastDepth = 200

// fastTok is a piece of a line that the block structure is made of: a
// sequence entry's "-", or the rest of a line from its first character.
type fastTok struct {
	off  int // in the chunk
	line int // in the chunk, from 1
	col  int // from 1
	dash bool
	text []byte // the rest of the line (not for a dash), comments included
}

// fastDoc is one document the fast path read.
type fastDoc struct {
	js        []byte
	marks     []mark
	line, col int // where its root starts, in the source
}

// yamlFast reads the chunk's documents: its root mapping, or each item of
// a root sequence. ok is false when the chunk is not all in the subset
// it reads (nothing is returned then).
func yamlFast(c yamlChunk) (docs []fastDoc, ok bool) {
	tp := fastToks.Get().(*[]fastTok)
	defer func() {
		clear(*tp) // (they point into the chunk)
		*tp = (*tp)[:0]
		fastToks.Put(tp)
	}()
	toks, ok := fastTokens(c.text, *tp)
	*tp = toks
	if !ok || len(toks) == 0 {
		return nil, false
	}
	p := fastParser{toks: toks, first: c.line}
	root := toks[0]
	if root.dash {
		// Each item of a root sequence is a document of its own.
		for p.i < len(toks) && toks[p.i].dash && toks[p.i].col == root.col {
			from := p.i
			item, ok := p.item(root.col)
			if !ok {
				return nil, false
			}
			l, col := p.pos(item)
			// Room for the item's JSON and marks: about its text, two a
			// token.
			end, n := len(c.text), len(toks)-from
			for k := from + 1; k < len(toks); k++ {
				if toks[k].dash && toks[k].col == root.col {
					end, n = toks[k].off, k-from
					break
				}
			}
			p.js, p.marks = make([]byte, 0, end-toks[from].off+16), make([]mark, 0, 2*n+1)
			if !p.node(item, 0) {
				return nil, false
			}
			docs = append(docs, fastDoc{js: p.js, marks: p.marks, line: l, col: col})
		}
	} else {
		if !isKeyTok(root) {
			return nil, false // a scalar document
		}
		l, col := p.pos(root)
		p.js, p.marks = make([]byte, 0, len(c.text)+16), make([]mark, 0, 2*len(toks)+1)
		if !p.node(root, 0) {
			return nil, false
		}
		docs = append(docs, fastDoc{js: p.js, marks: p.marks, line: l, col: col})
	}
	if p.i != len(toks) {
		return nil, false // something after the root, less indented
	}
	return docs, true
}

// fastToks are the tokens of chunks read, for the next.
var fastToks = sync.Pool{New: func() any { return new([]fastTok) }}

// fastTokens cuts a chunk into tokens, appended to toks, leaving out
// blank and comment lines; false if it holds a byte the fast path does
// not read.
func fastTokens(text []byte, toks []fastTok) ([]fastTok, bool) {
	line, at := 0, 0
	for len(text) > 0 {
		line++
		end := 0
		for end < len(text) && text[end] != '\n' {
			c := text[end]
			if c < 0x20 || c > 0x7e {
				return toks, false // tabs, CR, control and non-ASCII bytes
			}
			end++
		}
		l, lineOff := text[:end], at
		if end < len(text) {
			end++
		}
		text, at = text[end:], at+end
		col := 0
		for {
			for col < len(l) && l[col] == ' ' {
				col++
			}
			if col == len(l) || l[col] == '#' {
				break // blank, or a comment
			}
			if l[col] == '-' && (col+1 == len(l) || l[col+1] == ' ') {
				toks = append(toks, fastTok{off: lineOff + col, line: line, col: col + 1, dash: true})
				col++
				continue
			}
			if line == 1 && col == 0 && (l[0] == '%' || l[0] == '-' && len(l) >= 3 && l[1] == '-' && l[2] == '-') {
				return toks, false // a directive, or a marker the chunker left
			}
			toks = append(toks, fastTok{off: lineOff + col, line: line, col: col + 1, text: l[col:]})
			break
		}
	}
	return toks, true
}

// isKeyTok reports whether a token starts a mapping entry (without
// checking the key itself: key does).
func isKeyTok(t fastTok) bool {
	if t.dash {
		return false
	}
	_, _, ok := splitKey(t.text)
	return ok
}

// splitKey finds the key of a mapping entry: its text as written (quotes
// included) and where the value starts (after ": ", or the end).
func splitKey(s []byte) (key []byte, rest int, ok bool) {
	i := 0
	switch {
	case len(s) == 0:
		return nil, 0, false
	case s[0] == '"' || s[0] == '\'':
		i = quotedEnd(s)
		if i < 0 {
			return nil, 0, false
		}
	default:
		for i < len(s) && !(s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ')) {
			if s[i] == '#' && i > 0 && s[i-1] == ' ' {
				return nil, 0, false // a comment before any ": "
			}
			i++
		}
	}
	if i == 0 || i >= len(s) || s[i] != ':' || i+1 < len(s) && s[i+1] != ' ' {
		return nil, 0, false
	}
	return s[:i], i + 1, true
}

// quotedEnd returns the offset after the quoted scalar s starts with, or
// -1 if it does not end on this line.
func quotedEnd(s []byte) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++ // '' is a quote
		case s[i] == q:
			return i + 1
		}
	}
	return -1
}

// fastParser writes one document's JSON and marks from the tokens.
type fastParser struct {
	toks  []fastTok
	i     int // next token
	first int // source line of the chunk's first line
	js    []byte
	marks []mark
	keys  [][2]int // offsets in js of the keys of the mappings being written
}

func (p *fastParser) pos(t fastTok) (int, int) { return t.line + p.first - 1, t.col }

func (p *fastParser) mark(line, col int) {
	p.marks = append(p.marks, mark{off: len(p.js), line: line + p.first - 1, col: col})
}

// item moves past a sequence entry's dash at col and returns the token
// its value starts with: on the same line, or below and further in.
func (p *fastParser) item(col int) (fastTok, bool) {
	dash := p.toks[p.i]
	p.i++
	if p.i == len(p.toks) {
		return fastTok{}, false // an empty item
	}
	t := p.toks[p.i]
	if t.line != dash.line && t.col <= col {
		return fastTok{}, false // an empty item
	}
	return t, true
}

// node writes the block node that starts with token t (the next one),
// nested depth levels deep.
func (p *fastParser) node(t fastTok, depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	if t.dash {
		return p.sequence(t.col, depth)
	}
	if !isKeyTok(t) {
		return false // a scalar alone on a line: a multi-line scalar, or a root scalar
	}
	return p.mapping(t.col, depth)
}

func (p *fastParser) sequence(col, depth int) bool {
	first := p.toks[p.i]
	p.mark(first.line, first.col)
	p.js = append(p.js, '[')
	n := 0
	for p.i < len(p.toks) && p.toks[p.i].dash && p.toks[p.i].col == col {
		dashLine := p.toks[p.i].line
		t, ok := p.item(col)
		if !ok {
			return false
		}
		if n > 0 {
			p.js = append(p.js, ',')
		}
		n++
		if t.line == dashLine && !t.dash && !isKeyTok(t) {
			// A scalar on the dash's line.
			p.i++
			if !p.scalar(t.line, t.col, t.text) || p.i < len(p.toks) && p.toks[p.i].col > col && !(p.toks[p.i].dash && p.toks[p.i].col == col) {
				return false
			}
			continue
		}
		if !p.node(t, depth+1) {
			return false
		}
	}
	if p.i < len(p.toks) && p.toks[p.i].col > col {
		return false
	}
	p.js = append(p.js, ']')
	return true
}

func (p *fastParser) mapping(col, depth int) bool {
	first := p.toks[p.i]
	p.mark(first.line, first.col)
	p.js = append(p.js, '{')
	base := len(p.keys)
	defer func() { p.keys = p.keys[:base] }()
	n := 0
	for p.i < len(p.toks) && p.toks[p.i].col == col && !p.toks[p.i].dash {
		t := p.toks[p.i]
		key, rest, ok := splitKey(t.text)
		if !ok {
			return false
		}
		if n > 0 {
			p.js = append(p.js, ',')
		}
		n++
		p.mark(t.line, t.col)
		from := len(p.js)
		if p.js, ok = appendFastKey(p.js, key); !ok {
			return false
		}
		k := p.js[from:]
		for _, o := range p.keys[base:] {
			if string(p.js[o[0]:o[1]]) == string(k) {
				return false // a repeated key: the node path says where
			}
		}
		p.keys = append(p.keys, [2]int{from, len(p.js)})
		p.js = append(p.js, ':')
		p.i++
		v := t.text[rest:]
		vcol := t.col + rest
		for len(v) > 0 && v[0] == ' ' {
			v, vcol = v[1:], vcol+1
		}
		if len(v) > 0 && v[0] != '#' {
			// The value on the key's line: nothing may follow it further in.
			if !p.scalar(t.line, vcol, v) || p.i < len(p.toks) && p.toks[p.i].col > col {
				return false
			}
			continue
		}
		// The value below: a node further in, or a sequence at the key's
		// column.
		if p.i == len(p.toks) {
			return false // an empty value
		}
		next := p.toks[p.i]
		if next.col < col || next.col == col && !next.dash {
			return false // an empty value
		}
		if !p.node(next, depth+1) {
			return false
		}
	}
	if p.i < len(p.toks) && p.toks[p.i].col > col {
		return false
	}
	p.js = append(p.js, '}')
	return true
}

// appendFastKey writes a mapping key as a JSON string: plain, or quoted
// on one line.
func appendFastKey(js, key []byte) ([]byte, bool) {
	switch key[0] {
	case '"', '\'':
		s, ok := fastQuoted(key)
		if !ok {
			return js, false
		}
		return appendJSONBytes(js, s), true
	}
	if !plainStart(key) || key[len(key)-1] == ' ' || string(key) == "<<" {
		return js, false
	}
	return appendJSONBytes(js, key), true
}

// plainStart reports whether s may start a plain scalar the fast path
// reads: not with an indicator, nor "-", "?" or ":" before a blank.
func plainStart(s []byte) bool {
	switch s[0] {
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ':
		return false
	case '-', '?', ':':
		return len(s) > 1 && s[1] != ' '
	}
	return true
}

// scalar writes the value v on one line at line:col (in the chunk): a
// quoted scalar, {} or [], or a plain scalar, each with an optional
// comment after it.
func (p *fastParser) scalar(line, col int, v []byte) bool {
	switch v[0] {
	case '"', '\'':
		end := quotedEnd(v)
		if end < 0 || !blankOrComment(v[end:]) {
			return false
		}
		s, ok := fastQuoted(v[:end])
		if !ok {
			return false
		}
		p.mark(line, col)
		p.js = appendJSONBytes(p.js, s)
		return true
	case '{', '[':
		if len(v) < 2 || v[1] != v[0]+2 || !blankOrComment(v[2:]) {
			return false // a flow collection other than {} and []
		}
		p.mark(line, col)
		p.js = append(p.js, v[0], v[1])
		return true
	}
	if !plainStart(v) {
		return false
	}
	end := len(v)
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && v[i-1] == ' ' {
			end = i
			break
		}
		if v[i] == ':' && (i+1 == len(v) || v[i+1] == ' ') {
			return false // a mapping where a value is
		}
	}
	if v[0] == ':' && len(v) == 1 {
		return false
	}
	for end > 0 && v[end-1] == ' ' {
		end--
	}
	p.mark(line, col)
	p.js = appendPlainBytes(p.js, v[:end])
	return true
}

// appendPlainBytes is appendPlain without making a string of text that
// is neither null, a boolean nor a number.
func appendPlainBytes(js, v []byte) []byte {
	switch string(v) {
	case "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE":
		return appendPlain(js, string(v))
	}
	if len(v) > 0 && len(v) < 19 && (v[0] != '0' || len(v) == 1) && isDigits(v, isDec) {
		return append(js, v...) // a decimal integer, as coreInt writes it
	}
	if len(v) == 0 || containsByte([]byte("~.+-0123456789"), v[0]) {
		return appendPlain(js, string(v))
	}
	return appendJSONBytes(js, v)
}

// appendJSONBytes is appendJSONString for bytes, without making a string
// of them when they are ASCII.
func appendJSONBytes(js, s []byte) []byte {
	for _, c := range s {
		if c >= 0x80 {
			return appendJSONString(js, string(s))
		}
	}
	js = append(js, '"')
	start := 0
	for i, c := range s {
		if c < 0x20 || c == '"' || c == '\\' {
			js = appendEscape(append(js, s[start:i]...), c)
			start = i + 1
		}
	}
	js = append(js, s[start:]...)
	return append(js, '"')
}

// blankOrComment reports whether what follows a value on its line is
// only blanks and a comment.
func blankOrComment(s []byte) bool {
	for i, c := range s {
		switch {
		case c == '#' && i > 0:
			return true
		case c != ' ':
			return false
		}
	}
	return true
}

// fastQuoted reads a quoted scalar on one line, quotes included: single
// quotes with a quote doubled for one, double quotes with the escapes \\ \" \n
// and \t (any other takes the node path; go.yaml.in/yaml/v3 refuses \/).
func fastQuoted(q []byte) ([]byte, bool) {
	s := q[1 : len(q)-1]
	if q[0] == '\'' {
		if !containsByte(s, '\'') {
			return s, true
		}
		out := make([]byte, 0, len(s))
		for i := 0; i < len(s); i++ {
			out = append(out, s[i])
			if s[i] == '\'' {
				i++
			}
		}
		return out, true
	}
	if !containsByte(s, '\\') {
		return s, true
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		i++
		switch s[i] {
		case '\\', '"':
			out = append(out, s[i])
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		default:
			return nil, false
		}
	}
	return out, true
}

func containsByte(s []byte, c byte) bool {
	for _, b := range s {
		if b == c {
			return true
		}
	}
	return false
}
