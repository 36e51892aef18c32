package constraint

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxTextLen bounds the input of Parse and ParseParams, so that a hostile
// document cannot make the parser allocate without limit.
const MaxTextLen = 64 << 10

// SyntaxError is a parse error in constraint or parameter text. It carries
// the byte offset so that callers embedding the text in a larger document
// (the authoring format) can point at the exact spot.
type SyntaxError struct {
	What   string // "constraints" or "params": which grammar was being parsed
	Input  string // the whole input
	Offset int    // byte offset of the problem in Input, or -1 if it has none
	Msg    string // what was expected and what was found
}

// Error renders `constraints "env=prod &&": at byte 11: expected a
// constraint, found end of input`; long inputs are abbreviated.
func (e *SyntaxError) Error() string {
	in := e.Input
	if len(in) > 80 {
		in = in[:72] + "..."
	}
	if e.Offset < 0 {
		return fmt.Sprintf("%s %q: %s", e.What, in, e.Msg)
	}
	return fmt.Sprintf("%s %q: at byte %d: %s", e.What, in, e.Offset, e.Msg)
}

// Parse reads the text syntax of docs/architecture.md §4.2:
//
//	key=value  key!=value  exists(key)  !x  x && y  x || y  (x)  true  false
//
// `!` binds tightest, then `&&`, then `||`; whitespace is insignificant.
// Keys and values matching [A-Za-z0-9._-]+ may be bare; anything else is a
// double-quoted Go string literal. A bare word followed by `(` is a function
// call (only exists is known), and a bare true or false not followed by `=`
// or `!=` is a literal, so `true=1` constrains a key named true. Empty keys
// are rejected, as FromProto rejects them: no deployment means one, and
// refusing them everywhere keeps text and proto interchangeable. "" and
// all-whitespace input give the zero (unconstrained) value. Errors are
// *SyntaxError.
func Parse(s string) (Constraints, error) {
	p := &parser{src: s, what: "constraints"}
	if len(s) > MaxTextLen {
		return Constraints{}, p.tooLong()
	}
	if err := p.advance(); err != nil {
		return Constraints{}, err
	}
	if p.tok.kind == tEOF {
		return Constraints{}, nil
	}
	n, err := p.parseOr()
	if err != nil {
		return Constraints{}, err
	}
	if p.tok.kind != tEOF {
		return Constraints{}, p.errorf(p.tok.pos, `expected "&&", "||" or end of input, found %s`, p.tok)
	}
	if n != nil && n.depth > MaxDepth {
		// Reachable when AND and OR alternate: each parenthesis then costs
		// two proto levels. Rejecting here keeps Proto/FromProto total on
		// everything Parse accepts.
		return Constraints{}, p.errorf(-1, "expression nests deeper than %d levels", MaxDepth)
	}
	return Constraints{n}, nil
}

// MustParse is Parse for expressions fixed in code, such as tests and
// defaults, where a syntax error is a bug; it panics on error.
func MustParse(s string) Constraints {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// quote renders a key or value: bare when plain, else a Go string literal.
func quote(s string) string {
	if isPlain(s) {
		return s
	}
	return strconv.Quote(s)
}

func isPlain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

type tokKind uint8

const (
	tEOF    tokKind = iota
	tWord           // bare key, value, literal or function name
	tString         // quoted string; text holds the unquoted value
	tLParen
	tRParen
	tNot // !
	tEq  // =
	tNe  // !=
	tAnd // &&
	tOr  // ||
	tComma
	tLBrace
	tRBrace
)

var punct = [...]string{
	tLParen: `"("`, tRParen: `")"`, tNot: `"!"`, tEq: `"="`, tNe: `"!="`,
	tAnd: `"&&"`, tOr: `"||"`, tComma: `","`, tLBrace: `"{"`, tRBrace: `"}"`,
}

type token struct {
	kind tokKind
	pos  int
	text string
}

// String describes the token for "found …" in error messages.
func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tWord:
		return "word " + strconv.Quote(t.text)
	case tString:
		return "quoted string " + strconv.Quote(t.text)
	}
	return punct[t.kind]
}

// parser is a recursive-descent parser over a lazily lexed token stream, so
// that the first error reported is the leftmost one.
type parser struct {
	src   string
	what  string
	pos   int   // next byte to lex
	tok   token // current token
	depth int   // open parentheses and negations
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &SyntaxError{What: p.what, Input: p.src, Offset: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) tooLong() error {
	return p.errorf(-1, "input is %d bytes, more than the limit of %d", len(p.src), MaxTextLen)
}

// advance lexes the next token into p.tok.
func (p *parser) advance() error {
	s := p.src
	for p.pos < len(s) && (s[p.pos] == ' ' || s[p.pos] == '\t' || s[p.pos] == '\n' || s[p.pos] == '\r') {
		p.pos++
	}
	start := p.pos
	if start >= len(s) {
		p.tok = token{kind: tEOF, pos: start}
		return nil
	}
	one := func(k tokKind, n int) error {
		p.pos += n
		p.tok = token{kind: k, pos: start}
		return nil
	}
	next := byte(0)
	if start+1 < len(s) {
		next = s[start+1]
	}
	switch c := s[start]; c {
	case '(':
		return one(tLParen, 1)
	case ')':
		return one(tRParen, 1)
	case ',':
		return one(tComma, 1)
	case '{':
		return one(tLBrace, 1)
	case '}':
		return one(tRBrace, 1)
	case '=':
		return one(tEq, 1)
	case '!':
		if next == '=' {
			return one(tNe, 2)
		}
		return one(tNot, 1)
	case '&':
		if next == '&' {
			return one(tAnd, 2)
		}
		return p.errorf(start, `unexpected character '&' (did you mean "&&"?)`)
	case '|':
		if next == '|' {
			return one(tOr, 2)
		}
		return p.errorf(start, `unexpected character '|' (did you mean "||"?)`)
	case '"':
		return p.lexString()
	default:
		if isWordByte(c) {
			end := start
			for end < len(s) && isWordByte(s[end]) {
				end++
			}
			p.pos = end
			p.tok = token{kind: tWord, pos: start, text: s[start:end]}
			return nil
		}
		r, _ := utf8.DecodeRuneInString(s[start:])
		if r == utf8.RuneError {
			return p.errorf(start, "unexpected byte 0x%02x", c)
		}
		return p.errorf(start, "unexpected character %q", r)
	}
}

// lexString finds the end of a double-quoted literal, then leaves the
// meaning of its escapes to strconv.Unquote, so the syntax is exactly Go's.
func (p *parser) lexString() error {
	s, start := p.src, p.pos
	for i := start + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '\n':
			return p.errorf(i, "newline in quoted string")
		case '"':
			v, err := strconv.Unquote(s[start : i+1])
			if err != nil {
				return p.errorf(start, "invalid quoted string %s", s[start:i+1])
			}
			p.pos = i + 1
			p.tok = token{kind: tString, pos: start, text: v}
			return nil
		}
	}
	return p.errorf(start, "unterminated quoted string")
}

// parseOr parses `x || y || …`; left-associativity is moot because the
// canonical form flattens the chain.
func (p *parser) parseOr() (*node, error) {
	x, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tOr {
		return x, nil
	}
	ops := []*node{x}
	for p.tok.kind == tOr {
		if err := p.advance(); err != nil {
			return nil, err
		}
		y, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		ops = append(ops, y)
	}
	return mkOr(ops), nil
}

func (p *parser) parseAnd() (*node, error) {
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tAnd {
		return x, nil
	}
	ops := []*node{x}
	for p.tok.kind == tAnd {
		if err := p.advance(); err != nil {
			return nil, err
		}
		y, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		ops = append(ops, y)
	}
	return mkAnd(ops), nil
}

// enter counts one level of recursion, so that `!!!!…` and `((((…` are
// refused before they can exhaust the stack.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf(p.tok.pos, "nesting deeper than %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) parseUnary() (*node, error) {
	if p.tok.kind != tNot {
		return p.parsePrimary()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	p.depth--
	return mkNot(x), nil
}

func (p *parser) parsePrimary() (*node, error) {
	switch p.tok.kind {
	case tLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errorf(p.tok.pos, `expected "&&", "||" or ")", found %s`, p.tok)
		}
		p.depth--
		return x, p.advance()
	case tWord:
		w := p.tok
		if err := p.advance(); err != nil {
			return nil, err
		}
		switch {
		case p.tok.kind == tLParen:
			return p.parseCall(w)
		case p.tok.kind == tEq || p.tok.kind == tNe:
			return p.parseComparison(w)
		case w.text == "true":
			return nil, nil
		case w.text == "false":
			return falseNode, nil
		}
		return p.parseComparison(w)
	case tString:
		w := p.tok
		if err := p.advance(); err != nil {
			return nil, err
		}
		return p.parseComparison(w)
	}
	return nil, p.errorf(p.tok.pos, "expected a constraint, found %s", p.tok)
}

// parseCall parses the rest of `name(key)`; p.tok is the "(".
func (p *parser) parseCall(name token) (*node, error) {
	if name.text != "exists" {
		return nil, p.errorf(name.pos, "unknown function %q (the only function is exists)", name.text)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tWord && p.tok.kind != tString {
		return nil, p.errorf(p.tok.pos, "expected a key, found %s", p.tok)
	}
	key := p.tok
	if key.text == "" {
		return nil, p.errorf(key.pos, "empty key")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tRParen {
		return nil, p.errorf(p.tok.pos, `expected ")", found %s`, p.tok)
	}
	return existsNode(key.text), p.advance()
}

// parseComparison parses the rest of `key=value` or `key!=value`; p.tok is
// the token after the key.
func (p *parser) parseComparison(key token) (*node, error) {
	if p.tok.kind != tEq && p.tok.kind != tNe {
		return nil, p.errorf(p.tok.pos, `expected "=" or "!=" after key %s, found %s`, quote(key.text), p.tok)
	}
	if key.text == "" {
		return nil, p.errorf(key.pos, "empty key")
	}
	negate := p.tok.kind == tNe
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tWord && p.tok.kind != tString {
		return nil, p.errorf(p.tok.pos, "expected a value, found %s", p.tok)
	}
	n := valueNode(key.text, p.tok.text)
	if negate {
		n = mkNot(n)
	}
	return n, p.advance()
}
