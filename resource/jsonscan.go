package resource

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file walks the JSON text of one document, which has already been
// found valid: the members of an object with their offsets, a repeated
// key, the field path at an offset and the offset of a field path. Errors
// are placed by offsets into the document's JSON, which its positions
// (jsonPositions, yamlPositions) map back to a line and column of the
// source.

// member is one member of a JSON object: the key, where it starts, and
// where its value starts and ends.
type member struct {
	key            string
	keyOff, valOff int
	valEnd         int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(js []byte, i int) int {
	for i < len(js) && isSpace(js[i]) {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at js[i] ('"').
func skipString(js []byte, i int) int {
	for i++; i < len(js); i++ {
		switch js[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(js)
}

// skipValue returns the offset after the value starting at js[i].
func skipValue(js []byte, i int) int {
	if i >= len(js) {
		return i
	}
	switch js[i] {
	case '"':
		return skipString(js, i)
	case '{', '[':
		depth := 0
		for ; i < len(js); i++ {
			switch js[i] {
			case '"':
				i = skipString(js, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(js)
	}
	for i < len(js) && !isSpace(js[i]) && js[i] != ',' && js[i] != '}' && js[i] != ']' {
		i++
	}
	return i
}

// unquote returns the text of the JSON string starting at js[i], with
// JSON's escapes (\/ and surrogate pairs included).
func unquote(js []byte, i int) string {
	end := skipString(js, i)
	s := js[i+1 : end-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		var u string
		if json.Unmarshal(js[i:end], &u) == nil {
			return u
		}
	}
	return string(s)
}

// members lists the members of the object starting at js[i] ('{'); nil
// if js[i] starts no object.
func members(js []byte, i int) []member {
	i = skipSpace(js, i)
	if i >= len(js) || js[i] != '{' {
		return nil
	}
	out := []member{}
	for i = skipSpace(js, i+1); i < len(js) && js[i] == '"'; {
		m := member{key: unquote(js, i), keyOff: i}
		i = skipSpace(js, skipString(js, i))
		if i < len(js) && js[i] == ':' {
			i++
		}
		m.valOff = skipSpace(js, i)
		m.valEnd = skipValue(js, m.valOff)
		out = append(out, m)
		i = skipSpace(js, m.valEnd)
		if i < len(js) && js[i] == ',' {
			i = skipSpace(js, i+1)
		}
	}
	return out
}

// elements lists the start offsets of the elements of the array starting
// at js[i] ('[').
func elements(js []byte, i int) []int {
	i = skipSpace(js, i)
	if i >= len(js) || js[i] != '[' {
		return nil
	}
	var out []int
	for i = skipSpace(js, i+1); i < len(js) && js[i] != ']'; {
		out = append(out, i)
		i = skipSpace(js, skipValue(js, i))
		if i < len(js) && js[i] == ',' {
			i = skipSpace(js, i+1)
		}
	}
	return out
}

// pathSegs is a field path being walked, spelled out only when needed,
// so that walking deeply nested JSON costs time and memory linear in its
// size.
type pathSegs []pathSeg

// String spells the path: fields joined by ".", list indexes and map keys
// in brackets (virtual_hosts[0].typed_per_filter_config["envoy.filters.http.rbac"]).
func (p pathSegs) String() string {
	var b strings.Builder
	for _, s := range p {
		switch s.kind {
		case 'i':
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case 'k':
			b.WriteByte('[')
			b.WriteString(strconv.Quote(s.name))
			b.WriteByte(']')
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		}
	}
	return b.String()
}

func keySeg(k string) pathSeg { return pathSeg{kind: 'f', name: k} }
func indexSeg(i int) pathSeg  { return pathSeg{kind: 'i', index: i} }

// duplicateKey finds the first key that repeats within one object of the
// document js, valid JSON: the field path of the repeated key, its offset
// and the offset of its first occurrence. encoding/json and protojson
// would silently keep the last value. It reads js once, and allocates
// little: frames are reused, and keys are compared as written unless one
// is escaped. deepest is how deeply objects and arrays nest in js.
func duplicateKey(js []byte) (p string, off, first int, found bool, deepest int) {
	type key struct{ start, end int } // the key's text, without its quotes
	type frame struct {
		obj  bool
		keys []key
		big  map[string]int // past 16 keys
		cur  key            // object: the key whose value comes next
		n    int            // array: elements so far
	}
	var (
		stack   []frame
		depth   int
		wantKey bool
	)
	text := func(k key) string {
		if bytes.IndexByte(js[k.start:k.end], '\\') >= 0 {
			return unquote(js, k.start-1)
		}
		return string(js[k.start:k.end])
	}
	same := func(a, b key) bool {
		ka, kb := js[a.start:a.end], js[b.start:b.end]
		if bytes.IndexByte(ka, '\\') < 0 && bytes.IndexByte(kb, '\\') < 0 {
			return bytes.Equal(ka, kb)
		}
		return text(a) == text(b)
	}
	path := func(last key) string {
		segs := make(pathSegs, 0, depth)
		for _, f := range stack[:depth-1] {
			if f.obj {
				segs = append(segs, keySeg(text(f.cur)))
			} else {
				segs = append(segs, indexSeg(f.n))
			}
		}
		return append(segs, keySeg(text(last))).String()
	}
	for i := 0; i < len(js); i++ {
		switch c := js[i]; c {
		case '{', '[':
			if depth == len(stack) {
				stack = append(stack, frame{})
			}
			f := &stack[depth]
			f.obj, f.keys, f.big, f.n = c == '{', f.keys[:0], nil, 0
			depth++
			deepest = max(deepest, depth)
			wantKey = c == '{'
		case '}', ']':
			depth--
			wantKey = false
		case ',':
			if top := &stack[depth-1]; top.obj {
				wantKey = true
			} else {
				top.n++
			}
		case '"':
			end := skipString(js, i)
			if wantKey {
				wantKey = false
				top := &stack[depth-1]
				k := key{i + 1, end - 1}
				prev, dup := -1, false
				if top.big != nil {
					t := text(k)
					prev, dup = top.big[t]
					top.big[t] = i
				} else {
					for _, o := range top.keys {
						if same(o, k) {
							prev, dup = o.start-1, true
							break
						}
					}
					top.keys = append(top.keys, k)
					if len(top.keys) > 16 {
						top.big = make(map[string]int, 32)
						for _, o := range top.keys {
							top.big[text(o)] = o.start - 1
						}
					}
				}
				if dup {
					return path(k), i, prev, true, deepest
				}
				top.cur = k
			}
			i = end - 1
		}
	}
	return "", 0, 0, false, deepest
}

// pathAt returns the field path of the innermost key or value of the
// document js that contains offset off.
func pathAt(js []byte, off int) string {
	var segs pathSegs
	i := 0
	for {
		i = skipSpace(js, i)
		if i >= len(js) {
			return segs.String()
		}
		next := -1
		switch js[i] {
		case '{':
			for _, m := range members(js, i) {
				if off < m.keyOff {
					break
				}
				if off < m.valOff {
					return append(segs, keySeg(m.key)).String()
				}
				if off < m.valEnd {
					segs, next = append(segs, keySeg(m.key)), m.valOff
					break
				}
			}
		case '[':
			for k, e := range elements(js, i) {
				if off < e {
					break
				}
				if off < skipValue(js, e) {
					segs, next = append(segs, indexSeg(k)), e
					break
				}
			}
		}
		if next < 0 {
			return segs.String()
		}
		i = next
	}
}

// offsetOf returns the offset of what a field path (as Validate, PGV and
// the decoder write them: snake_case names, [index], ["map key"]) names in
// the value at js[0]: a member's value, or an element. A path that goes
// further than the JSON (a required field left out) gives the offset of
// the deepest part that exists.
func offsetOf(js []byte, path string) int {
	at := skipSpace(js, 0)
	for path != "" {
		var seg string
		index := -1
		switch {
		case strings.HasPrefix(path, `["`):
			end := strings.Index(path, `"]`)
			if end < 0 {
				return at
			}
			seg, _ = strconv.Unquote(path[1 : end+1])
			path = path[end+2:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return at
			}
			if n, err := strconv.Atoi(path[1:end]); err == nil {
				index = n
			} else {
				seg = path[1:end]
			}
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			seg, path = path[:end], path[end:]
		}
		path = strings.TrimPrefix(path, ".")
		next := -1
		if index >= 0 {
			if es := elements(js, at); index < len(es) {
				next = es[index]
			}
		} else {
			for _, m := range members(js, at) {
				if sameField(m.key, seg) {
					next = m.valOff
					break
				}
			}
		}
		if next < 0 {
			return at
		}
		at = next
	}
	return at
}

// sameField reports whether a JSON key names the field of a path segment:
// protojson takes a field by its proto name (lb_policy) or its JSON name
// (lbPolicy).
func sameField(key, seg string) bool {
	if key == seg {
		return true
	}
	i, j := 0, 0
	for i < len(key) && j < len(seg) {
		a, b := key[i], seg[j]
		if a == '_' {
			i++
			continue
		}
		if b == '_' {
			j++
			continue
		}
		if lower(a) != lower(b) {
			return false
		}
		i, j = i+1, j+1
	}
	for i < len(key) && key[i] == '_' {
		i++
	}
	for j < len(seg) && seg[j] == '_' {
		j++
	}
	return i == len(key) && j == len(seg)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lineCol returns the 1-based line and column of offset off in text, the
// column counted in characters.
func lineCol(text []byte, off int) (line, col int) {
	off = min(off, len(text))
	line, start := 1, 0
	for i := 0; i < off; i++ {
		if text[i] == '\n' {
			line++
			start = i + 1
		}
	}
	return line, utf8.RuneCount(text[start:off]) + 1
}

// blankMember returns a copy of the object text obj with member k (and a
// comma next to it) overwritten by spaces, so that what remains is valid
// JSON in which every other byte keeps its offset, line and column.
// Newlines are kept for the same reason.
func blankMember(obj []byte, ms []member, k int) []byte {
	out := append([]byte(nil), obj...)
	from, to := ms[k].keyOff, ms[k].valEnd
	switch {
	case k+1 < len(ms):
		to = ms[k+1].keyOff // the comma after it
	case k > 0:
		from = ms[k-1].valEnd // the comma before it
	}
	for i := from; i < to; i++ {
		if out[i] != '\n' && out[i] != '\r' {
			out[i] = ' '
		}
	}
	return out
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}
