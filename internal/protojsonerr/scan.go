package protojsonerr

import (
	"bytes"
	"encoding/json"
)

// The JSON the walker reads is valid (the caller's promise), so these
// only find where things are; they check nothing.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// space returns the offset of the first non-space byte at or after i.
func (w *walker) space(i int) int {
	for i < len(w.js) && isSpace(w.js[i]) {
		i++
	}
	return i
}

// skip returns the offset after the value (or key) starting at js[i].
func (w *walker) skip(i int) int {
	js := w.js
	if i >= len(js) {
		return i
	}
	switch js[i] {
	case '"':
		for i++; i < len(js); i++ {
			switch js[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return len(js)
	case '{', '[':
		depth := 0
		for ; i < len(js); i++ {
			switch js[i] {
			case '"':
				i = w.skip(i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
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

func (w *walker) isNull(i int) bool { return bytes.HasPrefix(w.js[i:], []byte("null")) }

// members lists the members of the object at js[i] ('{').
func (w *walker) members(i int) []member {
	var out []member
	for i = w.space(i + 1); i < len(w.js) && w.js[i] == '"'; {
		end := w.skip(i)
		m := member{key: unquote(w.js[i:end]), keyOff: i}
		i = w.space(end)
		if i < len(w.js) && w.js[i] == ':' {
			i++
		}
		m.valOff = w.space(i)
		m.valEnd = w.skip(m.valOff)
		out = append(out, m)
		if i = w.space(m.valEnd); i < len(w.js) && w.js[i] == ',' {
			i = w.space(i + 1)
		}
	}
	return out
}

// elements lists the offsets of the elements of the array at js[i] ('[').
func (w *walker) elements(i int) []int {
	var out []int
	for i = w.space(i + 1); i < len(w.js) && w.js[i] != ']'; {
		out = append(out, i)
		if i = w.space(w.skip(i)); i < len(w.js) && w.js[i] == ',' {
			i = w.space(i + 1)
		}
	}
	return out
}

// unquote returns the text of the JSON string q, quotes included in q.
func unquote(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return string(q[1 : len(q)-1])
	}
	return s
}
