package constraint

import (
	"slices"
	"strings"
)

// String renders p canonically, as `{env=prod, version=v1}`: sorted by key,
// keys and values quoted like the text syntax when they are not plain words,
// `{}` when empty. ParseParams reads it back.
func (p Params) String() string {
	return "{" + p.join(", ") + "}"
}

// Key is a compact canonical encoding of p (`env=prod,version=v1`), so that
// equal maps, and only equal maps, get equal keys; caches use it to share
// one selection among subscribers that send the same parameters. It is ""
// for the empty set and ParseParams accepts it.
func (p Params) Key() string {
	return p.join(",")
}

func (p Params) join(sep string) string {
	if len(p) == 0 {
		return ""
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(quote(k))
		b.WriteByte('=')
		b.WriteString(quote(p[k]))
	}
	return b.String()
}

// ParseParams is the inverse of Params.String and Params.Key. It also
// accepts a bare `k=v, k2=v2` list without braces, the way a user types
// parameters on a command line. Keys and values follow the text syntax's
// quoting rules; a repeated key is an error rather than a silent overwrite.
func ParseParams(s string) (Params, error) {
	p := &parser{src: s, what: "params"}
	if len(s) > MaxTextLen {
		return nil, p.tooLong()
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	braced := p.tok.kind == tLBrace
	if braced {
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	out := Params{}
	if !(braced && p.tok.kind == tRBrace || !braced && p.tok.kind == tEOF) {
		for {
			if p.tok.kind != tWord && p.tok.kind != tString {
				return nil, p.errorf(p.tok.pos, "expected a key, found %s", p.tok)
			}
			key, keyPos := p.tok.text, p.tok.pos
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tEq {
				return nil, p.errorf(p.tok.pos, `expected "=" after key, found %s`, p.tok)
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tWord && p.tok.kind != tString {
				return nil, p.errorf(p.tok.pos, "expected a value, found %s", p.tok)
			}
			if _, dup := out[key]; dup {
				return nil, p.errorf(keyPos, "duplicate key %s", quote(key))
			}
			out[key] = p.tok.text
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tComma {
				break
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
	}
	if braced {
		if p.tok.kind != tRBrace {
			return nil, p.errorf(p.tok.pos, `expected "," or "}", found %s`, p.tok)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tEOF {
			return nil, p.errorf(p.tok.pos, "expected end of input, found %s", p.tok)
		}
	} else if p.tok.kind != tEOF {
		return nil, p.errorf(p.tok.pos, `expected "," or end of input, found %s`, p.tok)
	}
	return out, nil
}
