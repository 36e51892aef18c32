package resource

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// jsonPositions place offsets of a document's JSON, which is a piece of
// its source starting at line:col.
type jsonPositions struct {
	js        []byte
	line, col int
}

func (p jsonPositions) at(off int) (int, int) {
	l, c := lineCol(p.js, off)
	if l == 1 {
		c += p.col - 1
	}
	return p.line + l - 1, c
}

// jsonSplitter reads a strict JSON source — one object, or an array of
// them — a block at a time and cuts it into documents, so that a source of
// any size is read in memory proportional to its largest document.
type jsonSplitter struct {
	source string
	r      io.Reader
	buf    []byte
	pos    int // next byte to read in buf
	keep   int // start of the value being read, which must stay in buf; -1 if none
	eof    bool
	rerr   error
	line   int // position of buf[pos]
	col    int
	last   [2]int // line and column just past the last non-blank byte read
}

func newJSONSplitter(source string, r io.Reader) *jsonSplitter {
	return &jsonSplitter{source: source, r: r, keep: -1, line: 1, col: 1, buf: make([]byte, 0, 64<<10)}
}

// fill reads more of the source; false at its end.
func (s *jsonSplitter) fill() bool {
	if s.eof {
		return false
	}
	from := s.pos
	if s.keep >= 0 {
		from = s.keep
	}
	if from > 0 {
		n := copy(s.buf, s.buf[from:])
		s.buf = s.buf[:n]
		s.pos -= from
		if s.keep >= 0 {
			s.keep -= from
		}
	}
	if cap(s.buf)-len(s.buf) < 16<<10 {
		nb := make([]byte, len(s.buf), 2*cap(s.buf)+64<<10)
		copy(nb, s.buf)
		s.buf = nb
	}
	for {
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err != nil {
			s.eof = true
			if !errors.Is(err, io.EOF) {
				s.rerr = err
			}
		}
		if n > 0 || s.eof {
			return n > 0
		}
	}
}

// peek returns the next byte without reading it.
func (s *jsonSplitter) peek() (byte, bool) {
	if s.pos >= len(s.buf) && !s.fill() {
		return 0, false
	}
	return s.buf[s.pos], true
}

// advance reads one byte, counting lines and columns (in characters).
func (s *jsonSplitter) advance() {
	c := s.buf[s.pos]
	s.pos++
	if !isSpace(c) {
		s.last = [2]int{s.line, s.col}
	}
	switch {
	case c == '\n':
		s.line++
		s.col = 1
	case c&0xC0 != 0x80:
		s.col++
	}
}

func (s *jsonSplitter) skipSpace() (byte, bool) {
	for {
		c, ok := s.peek()
		if !ok || !isSpace(c) {
			return c, ok
		}
		s.advance()
	}
}

// errorf is a problem with the source at the current position.
func (s *jsonSplitter) errorf(index int, format string, args ...any) *DocError {
	return &DocError{Source: s.source, Index: index, Line: s.line, Column: s.col, Msg: "invalid JSON: " + fmt.Sprintf(format, args...)}
}

// endError reports the end of the source where more was expected, just
// past its last byte.
func (s *jsonSplitter) endError(index int) *DocError {
	if s.rerr != nil {
		return &DocError{Source: s.source, Index: index, Msg: "reading: " + s.rerr.Error()}
	}
	return &DocError{Source: s.source, Index: index, Line: s.last[0], Column: s.last[1] + 1, Msg: "invalid JSON: unexpected end of input"}
}

func describeByte(c byte) string {
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte %#02x", c)
	}
	return fmt.Sprintf("%q", c)
}

// value reads the value at the current position, without checking it
// beyond its brackets and strings: json.Valid does, on the value alone.
// It returns a copy.
func (s *jsonSplitter) value(index int) ([]byte, *DocError) {
	s.keep = s.pos
	defer func() { s.keep = -1 }()
	depth, inStr, esc := 0, false, false
	c, _ := s.peek()
	scalar := c != '{' && c != '[' && c != '"'
	scan := s.pos // the next byte to look at; those before it are read
	for {
		if scan-s.keep > MaxDocumentBytes {
			s.consume(scan)
			return nil, s.errorf(index, "a document larger than %d bytes", MaxDocumentBytes)
		}
		if scan >= len(s.buf) {
			off := scan - s.keep
			more := s.fill() // (which may move what is kept)
			scan = s.keep + off
			if !more {
				s.consume(scan)
				if scalar && depth == 0 && !inStr {
					return append([]byte(nil), s.buf[s.keep:s.pos]...), nil
				}
				return nil, s.endError(index)
			}
		}
		// The bytes up to the end of the buffer, or one past the largest
		// document, looked at in a tight loop; positions are counted once
		// the value's end is found.
		end := min(len(s.buf), s.keep+MaxDocumentBytes+1)
		done := false
		for ; scan < end && !done; scan++ {
			c := s.buf[scan]
			switch {
			case esc:
				esc = false
			case inStr:
				switch c {
				case '\\':
					esc = true
				case '"':
					inStr = false
					done = depth == 0
				}
			case scalar:
				if isSpace(c) || c == ',' || c == ']' || c == '}' {
					s.consume(scan)
					return append([]byte(nil), s.buf[s.keep:s.pos]...), nil
				}
			case c == '"':
				inStr = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
				done = depth == 0
			}
		}
		if done {
			break
		}
	}
	s.consume(scan)
	return append([]byte(nil), s.buf[s.keep:s.pos]...), nil
}

// consume reads the bytes of buf up to end, counting lines and columns
// as advance does byte by byte.
func (s *jsonSplitter) consume(end int) {
	b := s.buf[s.pos:end]
	s.pos = end
	line, col := s.line, s.col
	s.line, s.col = after(line, col, b)
	// Where the last byte not blank is (endError reports the end there).
	k := len(b) - 1
	for k >= 0 && isSpace(b[k]) {
		k--
	}
	switch {
	case k < 0:
	case k == len(b)-1 && b[k]&0xC0 != 0x80:
		s.last = [2]int{s.line, s.col - 1}
	case k == len(b)-1:
		s.last = [2]int{s.line, s.col}
	default:
		l, c := after(line, col, b[:k])
		s.last = [2]int{l, c}
	}
}

// after returns the line and column just after b, which starts at
// line:col; a column counts characters, not bytes.
func after(line, col int, b []byte) (int, int) {
	if nl := bytes.Count(b, []byte{'\n'}); nl > 0 {
		line += nl
		col = 1
		b = b[bytes.LastIndexByte(b, '\n')+1:]
	}
	return line, col + chars(b)
}

// chars counts the bytes of b that do not continue a UTF-8 sequence: its
// characters, if it is valid UTF-8. Eight bytes at a time: a continuation
// byte is 10xxxxxx, and w &^ (w << 1) has bit 7 of a byte set when its
// bit 7 is and its bit 6 is not.
func chars(b []byte) int {
	n := len(b)
	for ; len(b) >= 8; b = b[8:] {
		w := binary.LittleEndian.Uint64(b)
		n -= bits.OnesCount64(w &^ (w << 1) & 0x8080808080808080)
	}
	for _, c := range b {
		if c&0xC0 == 0x80 {
			n--
		}
	}
	return n
}

// split calls doc with each document of the source and bad with each
// problem, until doc returns false. A problem with the structure of the
// source ends it. Whether each document is valid JSON is left to
// decodeDoc, which runs in parallel.
func (s *jsonSplitter) split(doc func(*docText) bool, bad func(ErrorList)) {
	emit := func(index, line, col int, js []byte) bool {
		loc := Location{Source: s.source, Index: index, Line: line, Column: col}
		return doc(&docText{loc: loc, js: js, pos: jsonPositions{js: js, line: line, col: col}, unchecked: true})
	}
	c, ok := s.skipSpace()
	if !ok {
		if s.rerr != nil {
			bad(ErrorList{s.endError(0)})
		}
		return // a blank source holds no documents
	}
	switch c {
	case '{':
		line, col := s.line, s.col
		js, err := s.value(1)
		if err != nil {
			bad(ErrorList{err})
			return
		}
		if c, ok := s.skipSpace(); ok {
			bad(ErrorList{s.errorf(0, "unexpected %s after the object (several documents go in an array: [{...}, {...}])", describeByte(c))})
			return
		}
		emit(1, line, col, js)
		return
	case '[':
		s.advance()
	default:
		bad(ErrorList{s.errorf(0, "unexpected %s: a JSON source holds one object, or an array of objects", describeByte(c))})
		return
	}
	for index := 1; ; index++ {
		c, ok := s.skipSpace()
		if !ok {
			bad(ErrorList{s.endError(0)})
			return
		}
		if c == ']' && index == 1 {
			s.advance()
			break
		}
		line, col := s.line, s.col
		js, err := s.value(index)
		if err != nil {
			bad(ErrorList{err})
			return
		}
		if !emit(index, line, col, js) {
			return
		}
		c, ok = s.skipSpace()
		if !ok {
			bad(ErrorList{s.endError(0)})
			return
		}
		s.advance()
		if c == ']' {
			break
		}
		if c != ',' {
			s.col-- // point at the byte, not past it
			bad(ErrorList{s.errorf(0, "unexpected %s after document %d: want ',' or ']'", describeByte(c), index)})
			return
		}
	}
	if c, ok := s.skipSpace(); ok {
		bad(ErrorList{s.errorf(0, "unexpected %s after the array", describeByte(c))})
	}
}

// endsEarly reports whether js, which is not valid JSON, is a truncated
// value: encoding/json's Decoder says so with io.ErrUnexpectedEOF (io.EOF
// when there is no value at all), where Unmarshal says it only in its
// message.
func endsEarly(js []byte) bool {
	var v any
	err := json.NewDecoder(bytes.NewReader(js)).Decode(&v)
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// jsonSyntaxError reports where js, a piece of a source starting at
// line:col, fails to parse as JSON: the offending byte, or just past the
// last one when it ends early.
func jsonSyntaxError(source string, index int, js []byte, line, col int) *DocError {
	var v any
	err := json.Unmarshal(js, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return &DocError{Source: source, Index: index, Line: line, Column: col, Msg: fmt.Sprintf("invalid JSON: %v", err)}
	}
	// Offset counts the bytes read, the offending one included; input
	// that ends early is pointed at just past its last byte.
	p := max(int(se.Offset)-1, 0)
	if endsEarly(js) {
		p = len(js)
		for p > 0 && isSpace(js[p-1]) {
			p--
		}
	}
	pos := jsonPositions{js: js, line: line, col: col}
	l, c := pos.at(p)
	return &DocError{Source: source, Index: index, Line: l, Column: c, Msg: "invalid JSON: " + se.Error()}
}
