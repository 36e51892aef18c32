package name

import (
	"fmt"
	"strconv"
	"strings"
)

// Param is one context parameter. Params are kept as an ordered slice
// rather than a map so that a Name's canonical order is visible and
// copying a Name stays cheap.
type Param struct{ Key, Value string }

// Name is a parsed resource name. The zero Name is the legacy name "".
//
// A Name is an xdstp name exactly when Type is non-empty, so a struct
// literal with a Type is usable without going through Parse. Legacy names
// are opaque: only their raw string (see Legacy) matters and the exported
// fields stay empty.
type Name struct {
	Authority string  // decoded
	Type      string  // resource type = full proto message name, e.g. envoy.config.listener.v3.Listener
	ID        string  // decoded id path, without leading "/" and without a trailing glob "/*"; may contain "/"
	Params    []Param // context params in canonical order, unique keys
	Glob      bool    // the URL path ended in a literal "/*" (or the id was exactly "*"); an escaped "%2A" is an id character
	Alt       *Name   // #alt= directive (an xdstp URL), or nil
	Entry     string  // #entry= directive, "" if none

	raw string // the legacy name; unused for xdstp names

	// emptyParent tells the glob "/*" (Envoy id "/*": the children of an
	// empty first segment) from "*" (id "*"), which both have an empty
	// ID. It is unexported so that a struct literal with Glob and no ID
	// keeps meaning the common "*"; it is ignored unless Glob is set and
	// ID is empty (see globUnderEmpty).
	emptyParent bool
}

// Error reports where a name failed to parse, so an operator can find the
// bad byte in a long URL instead of guessing from the message.
type Error struct {
	Input  string // the whole input
	Offset int    // byte offset in Input where the problem is
	Msg    string // what is wrong
}

// Error quotes the input because names routinely contain spaces, control
// bytes and other characters that would make an unquoted message ambiguous.
func (e *Error) Error() string {
	return "name " + strconv.Quote(e.Input) + ": at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

const (
	schemePrefix = "xdstp:"
	xdstpPrefix  = "xdstp://"

	// maxAltDepth bounds alt= nesting. An alt value may carry its own alt
	// with no extra escaping (the outer fragment starts at the first '#'),
	// so without a bound a linear-size input could recurse arbitrarily
	// deep.
	maxAltDepth = 8
)

// Legacy wraps a non-xdstp name. It does not validate: it is meant for
// names already known to be opaque (a Legacy name that happens to start
// with "xdstp:" is still compared and printed as a raw string).
func Legacy(s string) Name { return Name{raw: s} }

// Parse accepts the URL form (globs and directives allowed), because that is
// what appears in configuration and subscriptions. Strings that do not start
// with "xdstp:" are legacy names and never fail, since legacy names are
// opaque to xDS.
func Parse(s string) (Name, error) {
	n, err := parse(s, 0)
	if err != nil {
		return Name{}, err
	}
	return n, nil
}

// ParseURN is Parse for places that need a cache key: TP1 says a URN carries
// no glob and no directives, so either one is an error here.
func ParseURN(s string) (Name, error) {
	n, err := parse(s, 0)
	if err != nil {
		return Name{}, err
	}
	if !n.IsXDSTP() {
		return n, nil
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		return Name{}, &Error{Input: s, Offset: i, Msg: "directives not allowed in a URN"}
	}
	if n.Glob {
		// Only a literal '*' ending the path makes a glob, and there are
		// no directives, so the star is just before the query, if any.
		end := len(s)
		if i := strings.IndexByte(s, '?'); i >= 0 {
			end = i
		}
		return Name{}, &Error{Input: s, Offset: end - 1, Msg: "glob not allowed in a URN"}
	}
	return n, nil
}

// MustParse exists for tests and package-level constants, where a bad
// name is a programming error.
func MustParse(s string) Name {
	n, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return n
}

// Canonical normalises a name string so that names which are Equal can be
// compared, logged or used as map keys as plain strings.
func Canonical(s string) (string, error) {
	n, err := Parse(s)
	if err != nil {
		return "", err
	}
	return n.String(), nil
}

// IsXDSTP tells callers whether the structured fields mean anything.
func (n Name) IsXDSTP() bool { return n.Type != "" }

// Param looks a context parameter up by key; the bool distinguishes an
// absent key from an empty value, which TP1 treats differently.
func (n Name) Param(key string) (string, bool) {
	for _, p := range n.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// URN strips directives, giving the cache key a URL refers to. Glob is kept
// because a glob subscription is itself keyed by its glob URL.
func (n Name) URN() Name {
	n.Alt = nil
	n.Entry = ""
	return n
}

// WithParams adds or overrides context parameters, as a client does when
// it layers node and resource parameters over the URL's own (later wins).
// The result owns a fresh Params slice, so n is never modified. Legacy
// names have no parameters and come back unchanged.
func (n Name) WithParams(ps ...Param) Name {
	if !n.IsXDSTP() {
		return n
	}
	out := make([]Param, 0, len(n.Params)+len(ps))
	out = append(out, n.Params...)
	out = dedupeFirst(out)
	for _, p := range ps {
		replaced := false
		for i := range out {
			if out[i].Key == p.Key {
				out[i].Value = p.Value
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, p)
		}
	}
	sortParams(out)
	if len(out) == 0 {
		out = nil
	}
	n.Params = out
	return n
}

// GlobCollection finds the glob a resource would be delivered under. Envoy
// matches a glob only against immediate children with identical
// parameters, so the last id segment is replaced by "*" and everything else
// is kept: as in Envoy's watchesInterestedIn, id "x" is under glob id "*"
// but "/x" under "/*", because an empty segment is still a segment. ok is
// false for legacy names, globs and names with an empty ID, which belong to
// no glob.
func (n Name) GlobCollection() (Name, bool) {
	if !n.IsXDSTP() || n.Glob || n.ID == "" {
		return Name{}, false
	}
	g := Name{
		Authority: n.Authority,
		Type:      n.Type,
		Params:    n.Params,
		Glob:      true,
	}
	if i := strings.LastIndexByte(n.ID, '/'); i >= 0 {
		g.ID = n.ID[:i]
		g.emptyParent = i == 0
	}
	return g, true
}

// globUnderEmpty reports whether n is the glob "/*", whose parent is an
// empty segment, as opposed to the glob "*", which has no parent.
func (n Name) globUnderEmpty() bool { return n.Glob && n.ID == "" && n.emptyParent }

// starLast reports whether the last segment of a non-glob id is "*". Such
// an id came from an escaped "%2A" and must be printed escaped again, or
// the printed name would parse as a glob.
func starLast(id string) bool {
	return id == "*" || strings.HasSuffix(id, "/*")
}

// Equal compares by component because the same URN may be spelled with
// parameters in any order and with any valid escaping (TP1
// "Normalization"). Legacy names compare by raw string.
func (n Name) Equal(o Name) bool {
	if n.IsXDSTP() != o.IsXDSTP() {
		return false
	}
	if !n.IsXDSTP() {
		return n.raw == o.raw
	}
	if n.Authority != o.Authority || n.Type != o.Type || n.ID != o.ID ||
		n.Glob != o.Glob || n.globUnderEmpty() != o.globUnderEmpty() || n.Entry != o.Entry {
		return false
	}
	if (n.Alt == nil) != (o.Alt == nil) {
		return false
	}
	if n.Alt != nil && !n.Alt.Equal(*o.Alt) {
		return false
	}
	return paramsEqual(n.Params, o.Params)
}

func paramsEqual(a, b []Param) bool {
	if !paramsCanonical(a) {
		a = canonicalParams(a)
	}
	if !paramsCanonical(b) {
		b = canonicalParams(b)
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// String prints the canonical form, which is what Envoy's encodeUrl prints
// with sorted parameters, so equal names always print the same bytes and
// our names match Envoy's on the wire. The one departure is an id whose
// last segment is "*" without being a glob (it was written "%2A"): that
// star stays escaped, since Envoy, which cannot tell the two apart, would
// print a glob. Legacy names print their raw string.
func (n Name) String() string {
	if !n.IsXDSTP() {
		return n.raw
	}
	params := n.Params
	if !paramsCanonical(params) {
		params = canonicalParams(params)
	}
	var alt string
	if n.Alt != nil {
		alt = n.Alt.String()
	}

	// The path after the type: "/" + id, then "/*" for a glob. A glob
	// with no parent is the bare "/*"; one under an empty segment is
	// "//*" (Envoy id "/*").
	id, starEsc := n.ID, false
	if !n.Glob && starLast(id) {
		id, starEsc = id[:len(id)-1], true
	}
	slashID := id != "" || starEsc || n.globUnderEmpty()
	size := len(xdstpPrefix) + escLen(n.Authority, &authEsc) + 1 + len(n.Type)
	if slashID {
		size += 1 + escLen(id, &idEsc)
	}
	if starEsc {
		size += len("%2A")
	}
	if n.Glob {
		size += 2
	}
	for _, p := range params {
		size += 2 + escLen(p.Key, &paramEsc) + escLen(p.Value, &paramEsc)
	}
	if n.Alt != nil {
		size += len("#alt=") + escLen(alt, &dirEsc)
	}
	if n.Entry != "" {
		size += len(",entry=") + escLen(n.Entry, &dirEsc)
	}

	var b strings.Builder
	b.Grow(size)
	b.WriteString(xdstpPrefix)
	writeEsc(&b, n.Authority, &authEsc)
	b.WriteByte('/')
	b.WriteString(n.Type)
	if slashID {
		b.WriteByte('/')
		writeEsc(&b, id, &idEsc)
	}
	if starEsc {
		b.WriteString("%2A")
	}
	if n.Glob {
		b.WriteString("/*")
	}
	for i, p := range params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		writeEsc(&b, p.Key, &paramEsc)
		b.WriteByte('=')
		writeEsc(&b, p.Value, &paramEsc)
	}
	// Directives go alt first, then entry: Envoy keeps whatever order it
	// was given, so we pick one to make the string canonical.
	sep := byte('#')
	if n.Alt != nil {
		b.WriteByte(sep)
		b.WriteString("alt=")
		writeEsc(&b, alt, &dirEsc)
		sep = ','
	}
	if n.Entry != "" {
		b.WriteByte(sep)
		b.WriteString("entry=")
		writeEsc(&b, n.Entry, &dirEsc)
	}
	return b.String()
}

// GoString makes %#v show the name itself rather than its fields, which is
// what one wants to read in test failures.
func (n Name) GoString() string {
	if !n.IsXDSTP() {
		return fmt.Sprintf("name.Legacy(%q)", n.raw)
	}
	return fmt.Sprintf("name.MustParse(%q)", n.String())
}

// parse is Parse with the alt nesting depth threaded through. It returns
// *Error rather than error so callers can wrap nested alt failures.
func parse(s string, depth int) (Name, *Error) {
	if !strings.HasPrefix(s, schemePrefix) {
		return Name{raw: s}, nil
	}
	if !strings.HasPrefix(s, xdstpPrefix) {
		return Name{}, &Error{Input: s, Offset: len(schemePrefix), Msg: `missing "//" after "xdstp:"`}
	}

	// Authority: up to the first '/'. A '?' or '#' first means there is no
	// path and hence no type.
	i := len(xdstpPrefix)
	for i < len(s) && s[i] != '/' && s[i] != '?' && s[i] != '#' {
		i++
	}
	if i == len(s) || s[i] != '/' {
		return Name{}, &Error{Input: s, Offset: i, Msg: "resource type missing"}
	}
	var n Name
	var err *Error
	if n.Authority, err = unescape(s, len(xdstpPrefix), i); err != nil {
		return Name{}, err
	}

	// Type: first path segment, taken literally.
	typeStart := i + 1
	i = typeStart
	for i < len(s) && typeChar[s[i]] {
		i++
	}
	if i < len(s) && s[i] != '/' && s[i] != '?' && s[i] != '#' {
		return Name{}, &Error{Input: s, Offset: i, Msg: "invalid character " + strconv.QuoteToASCII(s[i:i+1]) + " in resource type"}
	}
	if i == typeStart {
		return Name{}, &Error{Input: s, Offset: typeStart, Msg: "resource type empty"}
	}
	n.Type = s[typeStart:i]

	// ID: the rest of the path, decoded as a whole so that "%2F" is a '/',
	// as in Envoy. The glob is found before decoding: TP1 makes a glob by
	// appending a "/*" component, and RFC 3986 holds an escaped reserved
	// character to be data, so "%2A" is an id "*", never a glob. An empty
	// segment before the star is kept ("//*" is not "/*"), as Envoy keeps
	// it in the id.
	if i < len(s) && s[i] == '/' {
		idStart := i + 1
		i = idStart
		for i < len(s) && s[i] != '?' && s[i] != '#' {
			i++
		}
		idEnd := i
		switch raw := s[idStart:i]; {
		case raw == "*":
			n.Glob, idEnd = true, idStart
		case strings.HasSuffix(raw, "/*"):
			n.Glob, idEnd = true, i-2
			n.emptyParent = idEnd == idStart
		}
		if n.ID, err = unescape(s, idStart, idEnd); err != nil {
			return Name{}, err
		}
	}

	if i < len(s) && s[i] == '?' {
		qStart := i + 1
		i = qStart
		for i < len(s) && s[i] != '#' {
			i++
		}
		if n.Params, err = parseQuery(s, qStart, i); err != nil {
			return Name{}, err
		}
	}

	if i < len(s) { // s[i] == '#'
		if err = parseFragment(&n, s, i+1, depth); err != nil {
			return Name{}, err
		}
	}
	return n, nil
}

// parseQuery decodes s[start:end]. For a repeated key the first value wins,
// as in Envoy and grpc-go.
func parseQuery(s string, start, end int) ([]Param, *Error) {
	q := s[start:end]
	if q == "" {
		return nil, nil
	}
	ps := make([]Param, 0, strings.Count(q, "&")+1)
	for pos := start; pos <= end; {
		partEnd := pos + strings.IndexByte(s[pos:end], '&')
		if partEnd < pos {
			partEnd = end
		}
		if partEnd > pos {
			eq := partEnd
			if j := strings.IndexByte(s[pos:partEnd], '='); j >= 0 {
				eq = pos + j
			}
			k, err := unescape(s, pos, eq)
			if err != nil {
				return nil, err
			}
			var v string
			if eq < partEnd {
				if v, err = unescape(s, eq+1, partEnd); err != nil {
					return nil, err
				}
			}
			ps = append(ps, Param{k, v})
		}
		pos = partEnd + 1
	}
	ps = dedupeFirst(ps)
	sortParams(ps)
	if len(ps) == 0 {
		return nil, nil
	}
	return ps, nil
}

func parseFragment(n *Name, s string, start, depth int) *Error {
	seenAlt := false
	for pos := start; pos <= len(s); {
		end := pos + strings.IndexByte(s[pos:], ',')
		if end < pos {
			end = len(s)
		}
		d := s[pos:end]
		switch {
		case d == "":
			return &Error{Input: s, Offset: pos, Msg: "empty directive"}
		case strings.HasPrefix(d, "alt="):
			if seenAlt {
				return &Error{Input: s, Offset: pos, Msg: `directive "alt" repeated`}
			}
			seenAlt = true
			vStart := pos + len("alt=")
			v, err := unescape(s, vStart, end)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(v, schemePrefix) {
				return &Error{Input: s, Offset: vStart, Msg: "alt is not an xdstp name"}
			}
			if depth+1 > maxAltDepth {
				return &Error{Input: s, Offset: vStart, Msg: "alt nested more than " + strconv.Itoa(maxAltDepth) + " deep"}
			}
			alt, err := parse(v, depth+1)
			if err != nil {
				// The inner offset is into the decoded value, so say so
				// rather than pretend it is an offset into s.
				return &Error{Input: s, Offset: vStart, Msg: "in alt at byte " + strconv.Itoa(err.Offset) + ": " + err.Msg}
			}
			n.Alt = &alt
		case strings.HasPrefix(d, "entry="):
			if n.Entry != "" {
				return &Error{Input: s, Offset: pos, Msg: `directive "entry" repeated`}
			}
			vStart := pos + len("entry=")
			v, err := unescape(s, vStart, end)
			if err != nil {
				return err
			}
			// Only emptiness is checked: Envoy's own test vectors carry
			// entries outside TP1's charset, so the stricter charset is
			// left to callers that validate collection entries.
			if v == "" {
				return &Error{Input: s, Offset: vStart, Msg: "empty entry"}
			}
			n.Entry = v
		default:
			return &Error{Input: s, Offset: pos, Msg: "unknown directive " + strconv.Quote(d)}
		}
		pos = end + 1
	}
	return nil
}

// typeChar is the resource type alphabet: proto full names plus '-', which
// Envoy's test vectors use. Nothing in it needs escaping, so types are
// never decoded.
var typeChar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['_'], t['.'], t['-'] = true, true, true
	return t
}()

func validType(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if !typeChar[t[i]] {
			return false
		}
	}
	return true
}
