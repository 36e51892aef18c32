package name

import (
	"slices"
	"strconv"
	"strings"
)

// escSet marks the bytes one component must percent-encode.
type escSet [256]bool

// The sets are Envoy's (source/common/config/xds_resource.cc): its
// PercentEncoding::encode always escapes bytes < 0x20 and >= 0x7E (so '~'
// is escaped but a space is not), plus a per-component list. Matching them
// exactly is what makes our canonical strings equal to Envoy's.
var (
	authEsc  = mkEscSet("%/?#")
	idEsc    = mkEscSet("%:?#[]")
	paramEsc = mkEscSet("%#[]&=")
	dirEsc   = mkEscSet("%#[],")
)

func mkEscSet(extra string) escSet {
	var t escSet
	for c := range t {
		t[c] = c < 0x20 || c >= 0x7E
	}
	for i := 0; i < len(extra); i++ {
		t[extra[i]] = true
	}
	return t
}

const upperHex = "0123456789ABCDEF"

func escLen(s string, t *escSet) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if t[s[i]] {
			n += 2
		}
	}
	return n
}

func writeEsc(b *strings.Builder, s string, t *escSet) {
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !t[c] {
			continue
		}
		b.WriteString(s[last:i])
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
		last = i + 1
	}
	b.WriteString(s[last:])
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescape decodes in[start:end]. It returns a substring of in when there
// is nothing to decode, which keeps Parse to one allocation in the common
// case. Errors carry the offset of the bad '%' in in.
func unescape(in string, start, end int) (string, *Error) {
	s := in[start:end]
	first := strings.IndexByte(s, '%')
	if first < 0 {
		return s, nil
	}
	buf := make([]byte, 0, len(s))
	buf = append(buf, s[:first]...)
	for i := first; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			buf = append(buf, c)
			continue
		}
		var hi, lo byte
		ok := i+2 < len(s)
		if ok {
			var ok1, ok2 bool
			hi, ok1 = unhex(s[i+1])
			lo, ok2 = unhex(s[i+2])
			ok = ok1 && ok2
		}
		if !ok {
			bad := s[i:min(i+3, len(s))]
			return "", &Error{Input: in, Offset: start + i, Msg: "invalid percent-escape " + strconv.Quote(bad)}
		}
		buf = append(buf, hi<<4|lo)
		i += 2
	}
	return string(buf), nil
}

// cmpParam orders params by their encoded "k=v" strings, bytewise. That is
// Envoy's order (it sorts the encoded query components), so a name we print
// is byte-identical to the one Envoy prints and looks up. It differs from
// key order: Envoy gives "a.b=x&a=y" where key order gives "a=y&a.b=x".
// The comparison streams the encodings so it never allocates.
func cmpParam(a, b Param) int {
	ea := paramEnc{k: a.Key, v: a.Value}
	eb := paramEnc{k: b.Key, v: b.Value}
	for {
		ca, oka := ea.next()
		cb, okb := eb.next()
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		case ca != cb:
			if ca < cb {
				return -1
			}
			return 1
		}
	}
}

// paramEnc yields the bytes of enc(k) + "=" + enc(v) one at a time.
type paramEnc struct {
	k, v    string
	seg, i  int
	pending [2]byte
	np      int
}

func (e *paramEnc) next() (byte, bool) {
	if e.np > 0 {
		c := e.pending[2-e.np]
		e.np--
		return c, true
	}
	for {
		switch e.seg {
		case 0:
			if e.i < len(e.k) {
				c := e.k[e.i]
				e.i++
				return e.emit(c), true
			}
			e.seg, e.i = 1, 0
		case 1:
			e.seg = 2
			return '=', true
		case 2:
			if e.i < len(e.v) {
				c := e.v[e.i]
				e.i++
				return e.emit(c), true
			}
			e.seg = 3
		default:
			return 0, false
		}
	}
}

func (e *paramEnc) emit(c byte) byte {
	if !paramEsc[c] {
		return c
	}
	e.pending = [2]byte{upperHex[c>>4], upperHex[c&15]}
	e.np = 2
	return '%'
}

// paramsCanonical reports whether ps is already in canonical form: strictly
// increasing in cmpParam order with no repeated key. Checking adjacent keys
// is enough because encoded keys contain no '=', so every param with a
// given key sorts into one contiguous run.
func paramsCanonical(ps []Param) bool {
	for i := 1; i < len(ps); i++ {
		if ps[i-1].Key == ps[i].Key || cmpParam(ps[i-1], ps[i]) >= 0 {
			return false
		}
	}
	return true
}

// canonicalParams returns a canonical copy of ps (first value wins for a
// repeated key), never aliasing ps.
func canonicalParams(ps []Param) []Param {
	if len(ps) == 0 {
		return nil
	}
	out := dedupeFirst(slices.Clone(ps))
	sortParams(out)
	return out
}

// dedupeFirst drops later occurrences of a key in place. Small lists are
// scanned; long ones (hostile input) use a map to stay linear.
func dedupeFirst(ps []Param) []Param {
	if len(ps) < 2 {
		return ps
	}
	out := ps[:0]
	if len(ps) <= 16 {
	next:
		for _, p := range ps {
			for _, q := range out {
				if q.Key == p.Key {
					continue next
				}
			}
			out = append(out, p)
		}
		return out
	}
	seen := make(map[string]struct{}, len(ps))
	for _, p := range ps {
		if _, dup := seen[p.Key]; dup {
			continue
		}
		seen[p.Key] = struct{}{}
		out = append(out, p)
	}
	return out
}

func sortParams(ps []Param) {
	if !slices.IsSortedFunc(ps, cmpParam) {
		slices.SortFunc(ps, cmpParam)
	}
}
