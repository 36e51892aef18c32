package resource

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// This file reads YAML through go.yaml.in/yaml/v3's node API and turns
// each document into JSON for the decoder, remembering for every key and
// value where in the source it came from. What the YAML layer would
// silently change is refused there, from the nodes themselves: a repeated
// key (whose last value would win), a value that YAML reads as a tag
// (`constraints: !exists(version)` is the tag "!exists(version)" on an
// empty value). Plain scalars follow the YAML 1.2 core schema, as the JSON
// mapping of protobuf expects: y, yes, on and off are strings, 0777 is the
// number 777, and only true and false are booleans.

// mark places an offset of a document's JSON in its source.
type mark struct{ off, line, col int }

// yamlPositions maps offsets of a document's JSON to the YAML nodes they
// were written from.
type yamlPositions []mark

func (p yamlPositions) at(off int) (line, col int) {
	lo, hi := 0, len(p)
	for lo < hi { // the last mark at or before off
		m := (lo + hi) / 2
		if p[m].off <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, 0
	}
	return p[lo-1].line, p[lo-1].col
}

// yamlChunk is one document of a YAML stream, cut at its markers.
type yamlChunk struct {
	text []byte
	line int // first line of the chunk in the source
}

// yamlChunks reads a YAML stream a document at a time, cutting at
// document markers: a line starting with "---" (content after it on the
// same line belongs to the new document) or "..." (end of document).
// Reading stops early when fn returns false. A document larger than
// MaxDocumentBytes is reported to tooBig and skipped, unless it starts
// like a JSON array (fn gets it whole).
func yamlChunks(r io.Reader, fn func(yamlChunk) bool, tooBig func(line int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		cur      []byte
		line, at = 0, 1
		skipping bool
		last     int // the size of the last chunk, which the next is likely to have
	)
	flush := func(next int) bool {
		ok := true
		if !skipping {
			ok = fn(yamlChunk{text: cur, line: at})
			last = len(cur)
		}
		cur, at, skipping = nil, next, false
		return ok
	}
	for {
		l, err := readLine(br)
		if len(l) == 0 && err != nil {
			if err == io.EOF {
				flush(line + 1)
				return nil
			}
			return err
		}
		line++
		t := bytes.TrimRight(l, "\r\n")
		switch {
		case string(t) == "---" || bytes.HasPrefix(t, []byte("--- ")) || bytes.HasPrefix(t, []byte("---\t")):
			if !flush(line) {
				return nil
			}
			if rest := bytes.TrimSpace(t[3:]); len(rest) > 0 && rest[0] != '#' {
				cur = append(append(cur, rest...), '\n')
			} else {
				at = line + 1
			}
		case string(t) == "..." || bytes.HasPrefix(t, []byte("... ")):
			if !flush(line + 1) {
				return nil
			}
		default:
			if len(cur) == 0 && len(bytes.TrimSpace(t)) == 0 {
				at = line + 1 // (and the line is left out: the chunk starts at line at)
				continue
			}
			if skipping {
				continue
			}
			if len(cur)+len(l) > MaxDocumentBytes && !startsArray(cur) {
				tooBig(at)
				cur, skipping = nil, true
				continue
			}
			if cur == nil && last > 0 {
				cur = make([]byte, 0, min(last+last/8+64, MaxDocumentBytes))
			}
			cur = append(cur, l...)
			if l[len(l)-1] != '\n' {
				cur = append(cur, '\n')
			}
		}
	}
}

// startsArray reports whether a chunk starts like a JSON array, which
// may be larger than MaxDocumentBytes (it holds many documents): read
// whole, it is then read as JSON, or refused as too large.
func startsArray(cur []byte) bool {
	i := skipSpace(cur, 0)
	return i < len(cur) && cur[i] == '['
}

// readLine reads one line, however long, with its newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	l, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return l, err
	}
	long := append([]byte(nil), l...)
	for errors.Is(err, bufio.ErrBufferFull) {
		l, err = br.ReadSlice('\n')
		long = append(long, l...)
	}
	return long, err
}

func isBlankYAML(b []byte) bool {
	for len(b) > 0 {
		var l []byte
		l, b, _ = bytes.Cut(b, []byte("\n"))
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// nodesOnly turns the fast paths for YAML documents off (JSON documents
// and plain block style), for tests that compare them with the nodes.
var nodesOnly atomic.Bool

// maxSyntaxReparse bounds how many syntax errors of one source are parsed
// a second time to number their lines from the top of the source.
const maxSyntaxReparse = 10

// yamlSource splits a YAML source into documents.
type yamlSource struct {
	source   string
	index    int           // documents so far
	reparsed *atomic.Int32 // syntax errors parsed again, in the whole source
}

// chunk turns one chunk into documents: its root mapping, or each item of
// a root sequence. Documents go to doc, problems to bad; syntax reports a
// chunk that is not YAML at all.
func (s *yamlSource) chunk(c yamlChunk, doc func(*docText), bad func(ErrorList)) (syntax bool) {
	if isBlankYAML(c.text) {
		return false
	}
	// A document of JSON (flow style that JSON can read) is read as JSON,
	// as in a JSON source; one in plain block style by the fast path.
	// Either way, the same JSON as the nodes would give.
	start := skipSpace(c.text, 0)
	if nodesOnly.Load() {
		return s.nodes(c, start, doc, bad)
	}
	if c.text[start] == '{' && json.Valid(c.text) {
		s.index++
		s.jsonDoc(c, start, s.index, doc)
		return false
	}
	if docs, ok := yamlFast(c); ok {
		for _, d := range docs {
			s.index++
			loc := Location{Source: s.source, Index: s.index, Line: d.line, Column: d.col}
			doc(&docText{loc: loc, js: d.js, pos: yamlPositions(d.marks)})
		}
		return false
	}
	return s.nodes(c, start, doc, bad)
}

// nodes reads a chunk through go.yaml.in/yaml/v3's nodes; start is the
// offset of its first byte that is not blank.
func (s *yamlSource) nodes(c yamlChunk, start int, doc func(*docText), bad func(ErrorList)) (syntax bool) {
	var root yaml.Node
	if err := yaml.Unmarshal(c.text, &root); err != nil {
		s.index++
		if c.text[start] == '{' || c.text[start] == '[' {
			// Neither JSON nor YAML: the author wrote JSON, and a complaint
			// from the YAML parser about ',' or '}' would only mislead. An
			// array holds several documents: its error names none.
			index := s.index
			if c.text[start] == '[' {
				index = 0
			}
			l, col := lineCol(c.text, start)
			bad(ErrorList{jsonSyntaxError(s.source, index, c.text[start:], c.line+l-1, col)})
			return true
		}
		// The parser numbers lines from the start of what it reads; parsed
		// again behind as many blank lines as precede the document, its
		// message numbers them from the top of the source.
		if c.line > 1 && s.reparsed.Add(1) <= maxSyntaxReparse {
			padded := make([]byte, c.line-1+len(c.text))
			for i := range c.line - 1 {
				padded[i] = '\n'
			}
			copy(padded[c.line-1:], c.text)
			var again yaml.Node
			if err2 := yaml.Unmarshal(padded, &again); err2 != nil {
				err = err2
			}
		}
		loc := Location{Source: s.source, Index: s.index, Line: c.line}
		line, cause := syntaxLine(c.text)
		if line > 0 {
			loc.Line = c.line + line - 1
		}
		if hint := tagHint(c); hint != "" || cause == "" {
			// The parser's own words, which a tag mistake explains.
			bad(ErrorList{loc.errorf("", "invalid YAML: %v%s", err, hint)})
		} else {
			bad(ErrorList{loc.errorf("", "invalid YAML: %s", cause)})
		}
		return true
	}
	if len(root.Content) == 0 {
		return false
	}
	n := root.Content[0]
	limit := 10*len(c.text) + 1<<20
	one := func(n *yaml.Node) {
		s.index++
		loc := Location{Source: s.source, Index: s.index, Line: n.Line + c.line - 1, Column: n.Column}
		cv := yamlConv{first: c.line, limit: limit}
		cv.value(n, "")
		if len(cv.errs) > 0 {
			errs := make(ErrorList, len(cv.errs))
			for i, e := range cv.errs {
				errs[i] = &DocError{Source: loc.Source, Index: loc.Index, Line: e.line, Column: e.col, Path: e.path, Msg: e.msg}
			}
			bad(errs)
			return
		}
		doc(&docText{loc: loc, js: cv.js, pos: yamlPositions(cv.marks)})
	}
	switch {
	case n.Kind == yaml.SequenceNode:
		for _, it := range n.Content {
			one(it)
		}
	case n.Kind == yaml.ScalarNode && n.Style&yaml.TaggedStyle == 0 && isNull(n.Value):
		// An empty document (a lone "~" or "null") holds nothing.
	default:
		one(n)
	}
	return false
}

// jsonDoc hands over the JSON value starting at offset start of a chunk
// that is valid JSON, as document index.
func (s *yamlSource) jsonDoc(c yamlChunk, start, index int, doc func(*docText)) {
	end := len(c.text)
	for end > start && isSpace(c.text[end-1]) {
		end--
	}
	js := c.text[start:end]
	l, col := lineCol(c.text, start)
	loc := Location{Source: s.source, Index: index, Line: c.line + l - 1, Column: col}
	doc(&docText{loc: loc, js: js, pos: jsonPositions{js: js, line: loc.Line, col: col}})
}

// yamlError is a problem found converting a document, at its node.
type yamlError struct {
	line, col int
	path, msg string
}

// yamlConv writes one YAML document as JSON.
type yamlConv struct {
	js    []byte
	marks []mark
	errs  []yamlError
	first int // source line of the chunk's first line
	limit int // JSON bytes the document may take, aliases expanded
	full  bool
	segs  pathSegs
	depth int
}

func (c *yamlConv) pos(n *yaml.Node) (int, int) { return n.Line + c.first - 1, n.Column }

func (c *yamlConv) mark(n *yaml.Node) {
	l, col := c.pos(n)
	c.marks = append(c.marks, mark{off: len(c.js), line: l, col: col})
}

func (c *yamlConv) path() string { return c.segs.String() }

func (c *yamlConv) errorf(n *yaml.Node, format string, args ...any) {
	l, col := c.pos(n)
	c.errs = append(c.errs, yamlError{line: l, col: col, path: c.path(), msg: fmt.Sprintf(format, args...)})
}

// maxYAMLDepth bounds the nesting of a document, aliases expanded: far
// beyond what any resource may nest (MaxNesting), and short of exhausting
// the stack.
const maxYAMLDepth = 10000

// value writes node n; key is the mapping key holding it ("" in a
// sequence), for messages that show how to write it.
func (c *yamlConv) value(n *yaml.Node, key string) {
	if c.full {
		return
	}
	if len(c.js) > c.limit || c.depth > maxYAMLDepth {
		c.full = true
		c.errorf(n, "the document expands to more than %d bytes (or nests deeper than %d), aliases included", c.limit, maxYAMLDepth)
		return
	}
	c.depth++
	defer func() { c.depth-- }()
	c.mark(n)
	switch n.Kind {
	case yaml.MappingNode:
		c.mapping(n)
	case yaml.SequenceNode:
		c.js = append(c.js, '[')
		for i, it := range n.Content {
			if i > 0 {
				c.js = append(c.js, ',')
			}
			c.segs = append(c.segs, indexSeg(i))
			c.value(it, "")
			c.segs = c.segs[:len(c.segs)-1]
		}
		c.js = append(c.js, ']')
	case yaml.AliasNode:
		c.value(n.Alias, key)
	case yaml.ScalarNode:
		c.scalar(n, key)
	default:
		c.js = append(c.js, "null"...)
	}
}

// pair is one key and value of a mapping, merges resolved.
type pair struct{ k, v *yaml.Node }

// mapping writes a mapping. Keys are checked structurally: each may appear
// once. A key tagged !ignore is left out with its value, as Envoy does, so
// that a bootstrap can hold anchors for aliases elsewhere. A merge key
// (<<) adds the pairs of the mappings it names that the mapping does not
// set itself.
func (c *yamlConv) mapping(n *yaml.Node) {
	c.js = append(c.js, '{')
	seen := map[string]*yaml.Node{}
	var merges []*yaml.Node
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := c.key(k)
		switch {
		case !ok:
			continue
		case k.Tag == "!ignore":
			continue
		case k.Tag == "!!merge" && k.Style&yaml.TaggedStyle == 0:
			merges = append(merges, v)
			continue
		}
		if prev, dup := seen[name]; dup {
			l, _ := c.pos(prev)
			c.segs = append(c.segs, keySeg(name))
			c.errorf(k, "duplicate key %q (first on line %d): a key may appear only once in a mapping (otherwise the last would silently win)", name, l)
			c.segs = c.segs[:len(c.segs)-1]
			continue
		}
		seen[name] = k
		out = append(out, pair{k, v})
	}
	for _, m := range merges {
		out = append(out, c.merged(m, seen, 0)...)
	}
	for i, p := range out {
		if i > 0 {
			c.js = append(c.js, ',')
		}
		name, _ := c.key(p.k)
		c.mark(p.k)
		c.js = appendJSONString(c.js, name)
		c.js = append(c.js, ':')
		c.segs = append(c.segs, keySeg(name))
		c.value(p.v, name)
		c.segs = c.segs[:len(c.segs)-1]
	}
	c.js = append(c.js, '}')
}

// key reads a mapping key: a scalar, plain or with a tag that keeps it
// text.
func (c *yamlConv) key(k *yaml.Node) (string, bool) {
	if k.Kind == yaml.AliasNode {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		c.errorf(k, "a mapping key must be a single value, not a %s", kindName(k.Kind))
		return "", false
	}
	if k.Style&yaml.TaggedStyle != 0 && k.Tag != "!ignore" && k.Tag != "!!str" && k.Tag != "!" {
		c.errorf(k, "%s", tagMessage("", "", k.Tag, k.Value))
		return "", false
	}
	return k.Value, true
}

// merged returns the pairs a merge key's value adds to a mapping whose keys
// are seen (and marks them seen): earlier mappings win over later ones.
func (c *yamlConv) merged(v *yaml.Node, seen map[string]*yaml.Node, depth int) []pair {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if depth > 100 {
		c.errorf(v, "merge keys nested too deeply")
		return nil
	}
	var out []pair
	switch v.Kind {
	case yaml.SequenceNode:
		for _, m := range v.Content {
			out = append(out, c.merged(m, seen, depth+1)...)
		}
	case yaml.MappingNode:
		var inner []*yaml.Node
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			name, ok := c.key(k)
			switch {
			case !ok || k.Tag == "!ignore":
				continue
			case k.Tag == "!!merge" && k.Style&yaml.TaggedStyle == 0:
				inner = append(inner, v.Content[i+1])
				continue
			}
			if _, dup := seen[name]; dup {
				continue
			}
			seen[name] = k
			out = append(out, pair{k, v.Content[i+1]})
		}
		for _, m := range inner {
			out = append(out, c.merged(m, seen, depth+1)...)
		}
	default:
		c.errorf(v, "a merge key (<<) takes a mapping or a list of mappings, not a %s", kindName(v.Kind))
	}
	return out
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "value"
	}
	return "document"
}

// scalar writes a scalar: text when quoted, a block or tagged !!str or !;
// the value its standard tag names; and a plain scalar by the YAML 1.2
// core schema.
func (c *yamlConv) scalar(n *yaml.Node, key string) {
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if n.Style&yaml.TaggedStyle == 0 {
		if quoted {
			c.js = appendJSONString(c.js, n.Value)
		} else {
			c.js = appendPlain(c.js, n.Value)
		}
		return
	}
	switch n.Tag {
	case "!!str", "!", "!!timestamp":
		c.js = appendJSONString(c.js, n.Value)
	case "!!binary": // base64, as the JSON mapping of bytes wants it
		c.js = appendJSONString(c.js, strings.Join(strings.Fields(n.Value), ""))
	case "!!null":
		c.js = append(c.js, "null"...)
	case "!!bool", "!!int", "!!float":
		js := appendPlain(nil, n.Value)
		ok := false
		switch n.Tag {
		case "!!bool":
			ok = string(js) == "true" || string(js) == "false"
		case "!!int":
			_, ok = coreInt(n.Value)
		default:
			ok = js[0] != '"' || string(js) == `"Infinity"` || string(js) == `"-Infinity"` || string(js) == `"NaN"`
		}
		if !ok {
			c.errorf(n, "%q is not a %s", n.Value, strings.TrimPrefix(n.Tag, "!!"))
			js = []byte("null")
		}
		c.js = append(c.js, js...)
	default:
		c.errorf(n, "%s", tagMessage(c.path(), key, n.Tag, n.Value))
		c.js = append(c.js, "null"...)
	}
}

// tagMessage explains a value that YAML read as a tag: a plain value
// starting with "!" is one, and YAML keeps only what follows it.
func tagMessage(path, key, tag, value string) string {
	if !strings.HasPrefix(tag, "!") {
		tag = "!<" + tag + ">" // a verbatim tag
	}
	text := tag
	if value != "" {
		text += " " + value
	}
	var lost string
	switch {
	case value != "":
		lost = fmt.Sprintf("so only %q would be kept", value)
	case path == "constraints":
		lost = "so the constraint would be dropped and the variant would match every client"
	default:
		lost = "so the value would be dropped"
	}
	return fmt.Sprintf("YAML reads %s as a tag, not as text, %s; quote a value that starts with \"!\": %s", tag, lost, quotedSuggestion(key, text))
}

// tagLineRE finds a line whose value starts with what YAML reads as a tag:
// `key: !x...` or `- !x...`, but not a standard "!!" tag, the verbatim
// "!<...>" form or the non-specific "! ".
var tagLineRE = regexp.MustCompile(`^[ \t]*(?:-[ \t]+)?(?:("[^"]*"|'[^']*'|[^\s"'#!-][^:#]*?)[ \t]*:[ \t]+)?(![^!<\s]\S*)(.*)$`)

// maxSyntaxLines bounds the documents whose syntax error syntaxLine
// looks for line by line (each look parses a prefix again).
const maxSyntaxLines = 2000

// syntaxLine finds the line of a document's syntax error from the parser's
// verdicts on the document's prefixes, not from its message (whose line
// numbers are off by one for some errors): the line after the longest
// prefix of whole lines that parses is the first the parser cannot take.
// It returns 0 when the document is too long to look. cause says what is
// wrong on that line when the line itself shows it (a tab in the
// indentation, a bracket left open), "" otherwise.
func syntaxLine(text []byte) (line int, cause string) {
	lines := bytes.SplitAfter(text, []byte("\n"))
	if len(lines) > maxSyntaxLines {
		return 0, ""
	}
	ok, end := 0, 0
	for i, l := range lines {
		end += len(l)
		var n yaml.Node
		if yaml.Unmarshal(text[:end], &n) == nil {
			ok = i + 1
		}
	}
	if ok >= len(lines) {
		return 0, ""
	}
	bad := string(lines[ok])
	indent := bad[:len(bad)-len(strings.TrimLeft(bad, " \t"))]
	switch {
	case strings.Contains(indent, "\t"):
		return ok + 1, "a tab in the indentation: YAML indents with spaces only"
	case openBrackets(bad) > 0:
		return ok + 1, "a [ or { opened on this line is never closed"
	}
	return ok + 1, ""
}

// openBrackets counts the flow brackets a line opens and does not close,
// outside quotes and comments.
func openBrackets(l string) int {
	n := 0
	var quote byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' '):
			return n
		case c == '[' || c == '{':
			n++
		case c == ']' || c == '}':
			n--
		}
	}
	return n
}

// tagHint explains a YAML syntax error that a tag probably caused, such
// as `constraints: !exists(version) && env=prod`, where YAML reads a tag
// and then an anchor "&" it cannot parse. The document does not parse, so
// this looks at its text: the first line whose value starts with "!".
func tagHint(c yamlChunk) string {
	for i, l := range strings.Split(string(c.text), "\n") {
		m := tagLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := stripComment(m[2] + m[3])
		return fmt.Sprintf(" (YAML reads %s on line %d as a tag; quote a value that starts with \"!\": %s)",
			m[2], i+c.line, quotedSuggestion(m[1], text))
	}
	return ""
}

// quotedSuggestion shows how to write text as a quoted YAML value under
// key, or as a sequence item when key is "". Go's quoting is valid YAML
// double-quoted style.
func quotedSuggestion(key, text string) string {
	if key == "" {
		return "- " + strconv.Quote(text)
	}
	return key + ": " + strconv.Quote(text)
}

var commentRE = regexp.MustCompile(`[ \t]+#.*$`)

// stripComment drops a trailing YAML comment (a '#' after a blank) and
// surrounding blanks.
func stripComment(s string) string {
	return strings.TrimSpace(commentRE.ReplaceAllString(s, ""))
}

func isNull(s string) bool {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// appendPlain writes a plain scalar by the YAML 1.2 core schema
// (https://yaml.org/spec/1.2.2/#1032-tag-resolution): null, a boolean, an
// integer, a float, or else text.
func appendPlain(js []byte, s string) []byte {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return append(js, "null"...)
	case "true", "True", "TRUE":
		return append(js, "true"...)
	case "false", "False", "FALSE":
		return append(js, "false"...)
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return append(js, `"Infinity"`...)
	case "-.inf", "-.Inf", "-.INF":
		return append(js, `"-Infinity"`...)
	case ".nan", ".NaN", ".NAN":
		return append(js, `"NaN"`...)
	}
	if n, ok := coreInt(s); ok {
		return append(js, n...)
	}
	if f, ok := coreFloat(s); ok {
		return append(js, f...)
	}
	return appendJSONString(js, s)
}

func isDigits[T string | []byte](s T, digit func(byte) bool) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !digit(s[i]) {
			return false
		}
	}
	return true
}

func isDec(c byte) bool { return '0' <= c && c <= '9' }
func isOct(c byte) bool { return '0' <= c && c <= '7' }
func isHex(c byte) bool { return isDec(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// coreInt reads a core-schema integer ([-+]?[0-9]+, 0o[0-7]+,
// 0x[0-9a-fA-F]+) as a JSON number, decimal, of any size.
func coreInt(s string) (string, bool) {
	switch {
	case strings.HasPrefix(s, "0o") && isDigits(s[2:], isOct):
		n, _ := new(big.Int).SetString(s[2:], 8)
		return n.String(), true
	case strings.HasPrefix(s, "0x") && isDigits(s[2:], isHex):
		n, _ := new(big.Int).SetString(s[2:], 16)
		return n.String(), true
	}
	sign := ""
	if s != "" && (s[0] == '-' || s[0] == '+') {
		if s[0] == '-' {
			sign = "-"
		}
		s = s[1:]
	}
	if !isDigits(s, isDec) {
		return "", false
	}
	s = strings.TrimLeft(s, "0")
	if len(s) == 0 {
		s = "0"
	}
	return sign + s, true
}

// coreFloat reads a core-schema float
// ([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?) as a JSON number.
func coreFloat(s string) (string, bool) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "+"), "-")
	mant, exp, hasExp := strings.Cut(strings.ReplaceAll(t, "E", "e"), "e")
	whole, frac, hasDot := strings.Cut(mant, ".")
	switch {
	case whole == "" && (!hasDot || !isDigits(frac, isDec)):
		return "", false
	case whole != "" && !isDigits(whole, isDec):
		return "", false
	case frac != "" && !isDigits(frac, isDec):
		return "", false
	case hasExp && !isDigits(strings.TrimPrefix(strings.TrimPrefix(exp, "+"), "-"), isDec):
		return "", false
	}
	f, err := strconv.ParseFloat(strings.TrimPrefix(s, "+"), 64)
	if err != nil {
		return "", false // out of range
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true
}

// appendJSONString writes s as a JSON string.
func appendJSONString(js []byte, s string) []byte {
	js = append(js, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				js = append(js, s[start:i]...)
				js = append(js, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		js = append(js, s[start:i]...)
		js = appendEscape(js, c)
		i++
		start = i
	}
	js = append(js, s[start:]...)
	return append(js, '"')
}

// appendEscape writes an ASCII byte that a JSON string escapes.
func appendEscape(js []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch c {
	case '"', '\\':
		return append(js, '\\', c)
	case '\n':
		return append(js, '\\', 'n')
	case '\r':
		return append(js, '\\', 'r')
	case '\t':
		return append(js, '\\', 't')
	}
	return append(js, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// JSONToYAML writes a JSON value as YAML, keeping the order of keys.
// Text YAML would read as something else (y, on, 0777, null) is quoted.
func JSONToYAML(js []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	n, err := jsonNode(dec)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// jsonNode reads the next JSON value as a YAML node.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, textNode(k.(string)))
			}
			c, err := jsonNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return textNode(v), nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
}

// textNode is a string scalar, quoted when a YAML reader, of version 1.2
// or of 1.1 (which read y, on and 0777 as a boolean and a number), could
// take it for anything else.
func textNode(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case strings.Contains(s, "\n"):
		n.Style = yaml.LiteralStyle
	case appendPlain(nil, s)[0] != '"', yaml11Bool[s], s != "" && strings.IndexByte("0123456789+-.~", s[0]) >= 0:
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// yaml11Bool are the booleans of YAML 1.1 that are text in YAML 1.2.
var yaml11Bool = map[string]bool{}

func init() {
	for _, w := range strings.Fields("y Y yes Yes YES n N no No NO on On ON off Off OFF") {
		yaml11Bool[w] = true
	}
}
