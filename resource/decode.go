package resource

import (
	"encoding/json"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/docprep"
	"github.com/xdsd/xdsd/resource/internal/pbjson"
)

// decodeDoc decodes and validates one document.
//
// With keepAnys, it also returns the contents of the Any values the
// validation decoded, for a docprep.Reader's Prepare (the client checks
// read them).
//
// It goes step by step, each a method of docDecoder that returns false
// when the document cannot go further (its errors are then in d.errs):
// the JSON (syntax, repeated keys), the wrapper, the payload's type, the
// type it is served as, the payload, the name, and validation.
func decodeDoc(t *docText, keepAnys bool) (*Document, *docprep.Anys, ErrorList) {
	d := docDecoder{t: t, js: t.js}
	if !d.checkJSON() || !d.readWrapper() || !d.payloadType() || !d.servedType() || !d.decodePayload() || !d.resolveName() {
		return nil, nil, d.errs
	}
	anys := d.validate(keepAnys)
	if len(d.errs) > 0 {
		return nil, nil, d.errs
	}
	body := d.body
	if body == nil {
		body = d.fast
	}
	v := NewVariant(d.typ, d.canon, d.cons, "", d.payloadURL, body)
	v.DoNotCache = d.dnc
	v.TTL = d.ttl
	return &Document{Location: t.loc, Variant: v, Message: d.msg, Raw: d.js, text: t, resPath: d.resPath}, anys, nil
}

// docDecoder is one document being decoded: what each step of decodeDoc
// found, for the next.
type docDecoder struct {
	t    *docText
	js   []byte
	errs ErrorList

	// checkJSON: a bare resource the fast path read (nil if it did not),
	// how deeply the document nests, and its top-level members (nil for
	// a bare resource the fast path read).
	pre     *preread
	deepest int
	top     []member

	// readWrapper: where the resource is (the whole document, or a
	// wrapper's "resource"), and what the wrapper says.
	resOff  int
	resPath string
	wName   string
	wType   string
	cons    constraint.Constraints
	dnc     bool
	ttl     time.Duration

	// payloadType: the resource's members (nil until needed for a bare
	// resource the fast path read), its "@type", and the message type.
	res []member
	tm  member
	mt  protoreflect.MessageType

	// servedType: the payload's type URL and the type it is served as.
	payloadURL string
	typ        *Type

	// decodePayload: the message, a collection's encoded body, and the
	// message's deterministic encoding when the fast path or Marshal made
	// it.
	msg  proto.Message
	body []byte
	fast []byte

	// resolveName: the canonical name it is served under.
	canon string
}

// fail records errors that stop the document, and returns false.
func (d *docDecoder) fail(es ...*DocError) bool {
	d.errs = append(d.errs, es...)
	return false
}

// checkJSON reads a bare resource with the fast path, which takes it
// whole only if it is valid JSON with no repeated key; anything else is
// checked for both here.
func (d *docDecoder) checkJSON() bool {
	t, js := d.t, d.js
	d.resOff = skipSpace(js, 0)
	d.pre, d.deepest = readBare(js)
	if d.pre != nil {
		// A bare resource the fast path read needs none of the scans
		// below but for errors: its type is known.
		return true
	}
	if t.unchecked && !json.Valid(js) {
		p := t.pos.(jsonPositions)
		return d.fail(jsonSyntaxError(t.loc.Source, t.loc.Index, js, p.line, p.col))
	}
	var (
		p         string
		off, from int
		dup       bool
	)
	if p, off, from, dup, d.deepest = duplicateKey(js); dup {
		key := p[strings.LastIndexAny(p, ".]")+1:]
		line, _ := t.pos.at(from)
		return d.fail(t.errAt(off, p, "duplicate key %q (first on line %d): a key may appear only once in an object (otherwise the last would silently win)", key, line))
	}
	if d.top = members(js, 0); d.top == nil {
		return d.fail(t.errAt(0, "", "a document must be an object: a resource with \"@type\", or a wrapper with \"resource\""))
	}
	return true
}

// readWrapper reads a wrapper (a document without "@type" at the top):
// its keys, and the name, type, constraints, do_not_cache and ttl it
// gives the resource it holds.
func (d *docDecoder) readWrapper() bool {
	t, js, top := d.t, d.js, d.top
	if _, bare := find(top, "@type"); bare || d.pre != nil {
		return true
	}
	for _, m := range top {
		if !wrapperKeys[m.key] {
			d.errs = append(d.errs, t.errAt(m.keyOff, m.key, "unknown field (a wrapper has name, type, constraints, do_not_cache, ttl and resource; a bare resource starts with \"@type\")"))
		}
	}
	m, ok := find(top, "resource")
	if !ok {
		return d.fail(t.errAt(0, "resource", "missing: a wrapper must hold the resource"))
	}
	d.resOff, d.resPath = m.valOff, "resource"
	value := func(k string) ([]byte, int, bool) {
		m, ok := find(top, k)
		return js[m.valOff:m.valEnd], m.valOff, ok
	}
	// (Decoded into locals: a pointer into d would move d to the heap.)
	var (
		name, typ string
		dnc       bool
	)
	if r, off, ok := value("name"); ok && json.Unmarshal(r, &name) != nil {
		d.errs = append(d.errs, t.errAt(off, "name", "must be a string"))
	}
	if r, off, ok := value("type"); ok && json.Unmarshal(r, &typ) != nil {
		d.errs = append(d.errs, t.errAt(off, "type", "must be a string"))
	}
	if r, off, ok := value("do_not_cache"); ok && json.Unmarshal(r, &dnc) != nil {
		d.errs = append(d.errs, t.errAt(off, "do_not_cache", "must be true or false"))
	}
	d.wName, d.wType, d.dnc = name, typ, dnc
	if r, off, ok := value("ttl"); ok {
		var txt string
		ttl, err := time.Duration(0), json.Unmarshal(r, &txt)
		if err == nil {
			ttl, err = time.ParseDuration(txt)
		}
		switch {
		case err != nil:
			d.errs = append(d.errs, t.errAt(off, "ttl", "must be a duration such as \"30s\" or \"1m30s\""))
		case ttl < MinTTL:
			d.errs = append(d.errs, t.errAt(off, "ttl", "%s is shorter than the minimum %s (clients holding it get a heartbeat every half TTL)", ttl, MinTTL))
		default:
			d.ttl = ttl
		}
	}
	if r, off, ok := value("constraints"); ok {
		c, err := decodeConstraints(r)
		if err != nil {
			d.errs = append(d.errs, t.errAt(off, "constraints", "%v", err))
		}
		d.cons = c
	}
	return true
}

// resMembers lists the resource's members, when a bare resource the fast
// path read needs them after all (for an error).
func (d *docDecoder) resMembers() {
	if d.res == nil {
		d.res = members(d.js, d.resOff)
		d.tm, _ = find(d.res, "@type")
	}
}

// payloadType finds the message type the resource's "@type" names.
func (d *docDecoder) payloadType() bool {
	if d.pre != nil {
		d.mt = d.pre.mt
		return true
	}
	t, js := d.t, d.js
	typePath := joinPath(d.resPath, "@type")
	d.res = d.top
	if d.resOff != skipSpace(js, 0) {
		d.res = members(js, d.resOff)
	}
	if d.res == nil {
		return d.fail(t.errAt(d.resOff, d.resPath, "must be an object with \"@type\""))
	}
	var ok bool
	if d.tm, ok = find(d.res, "@type"); !ok {
		return d.fail(t.errAt(d.resOff, typePath, "missing: every resource names its type, e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster"))
	}
	var typeURL string
	if err := json.Unmarshal(js[d.tm.valOff:d.tm.valEnd], &typeURL); err != nil || typeURL == "" {
		return d.fail(t.errAt(d.tm.valOff, typePath, "must be a non-empty string"))
	}
	if !strings.Contains(typeURL, "/") {
		typeURL = TypePrefix + typeURL
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
	if err != nil {
		return d.fail(t.errAt(d.tm.valOff, typePath, "%s", unknownType(typeURL, true)))
	}
	d.mt = mt
	return true
}

// servedType finds the xDS type the resource is served as: its payload's,
// or the wrapper's for a redirect (an xds.core.v3.ResourceLocator).
func (d *docDecoder) servedType() bool {
	t := d.t
	d.payloadURL = TypePrefix + string(d.mt.Descriptor().FullName())
	d.typ = ForURL(d.payloadURL)
	if d.typ.URL == d.payloadURL {
		// The type's own string: the variant keeps it, and 100,000
		// resources would otherwise keep 100,000 copies of it.
		d.payloadURL = d.typ.URL
	} else if d.payloadURL == LocatorURL {
		d.payloadURL = LocatorURL
	}
	if d.wType != "" {
		wt, err := Lookup(d.wType)
		if err != nil {
			return d.fail(t.errPath("type", "%v", err))
		}
		d.typ = wt
	}
	if !d.typ.Known {
		d.resMembers()
		return d.fail(t.errAt(d.tm.valOff, joinPath(d.resPath, "@type"), "%s is not an xDS resource type xdsd serves", d.mt.Descriptor().FullName()))
	}
	if d.ttl > 0 && d.typ.URL == VirtualHostURL {
		d.errs = append(d.errs, t.errPath("ttl", "on-demand virtual hosts take no TTL (Envoy does not renew them by heartbeat)"))
	}
	if d.typ.URL != d.payloadURL && d.payloadURL != LocatorURL {
		return d.fail(t.errPath("type", "the resource is a %s, not a %s (only a redirect, an xds.core.v3.ResourceLocator, may be served as another type)", d.mt.Descriptor().FullName(), d.typ.Name))
	}
	return true
}

// decodePayload decodes the resource: a list collection entry by entry,
// anything else with the fast path if it takes it, else with protojson.
func (d *docDecoder) decodePayload() bool {
	t, js := d.t, d.js
	if d.typ.Element != nil && d.payloadURL == d.typ.URL {
		d.resMembers()
		d.msg, d.body, d.errs = decodeCollection(t, d.resPath, d.typ, d.res, d.errs)
		return d.msg != nil
	}
	d.msg = d.mt.New().Interface()
	// The fast path first: it reads most resources straight into their
	// encoding, and leaves to protojson what it does not take (errors
	// included), which then reads it as always.
	var ok bool
	if d.pre != nil {
		d.fast, ok = d.pre.body, true
	} else if !protojsonOnly.Load() {
		d.fast, _, ok = pbjson.Transcode(js[d.resOff:skipValue(js, d.resOff)], d.mt.Descriptor(), true)
	}
	if ok {
		ok = proto.Unmarshal(d.fast, d.msg) == nil
	}
	if ok {
		return true
	}
	d.fast = nil
	proto.Reset(d.msg)
	d.resMembers()
	// The resource's fields without its "@type", every other byte at its
	// place, so that the decoder's positions are the source's.
	end := skipValue(js, d.resOff)
	rel := make([]member, len(d.res))
	at := 0
	for i, m := range d.res {
		rel[i] = member{key: m.key, keyOff: m.keyOff - d.resOff, valOff: m.valOff - d.resOff, valEnd: m.valEnd - d.resOff}
		if m.key == "@type" {
			at = i
		}
	}
	if e := t.unmarshal(blankMember(js[d.resOff:end], rel, at), d.resOff, d.msg); e != nil {
		return d.fail(e)
	}
	return true
}

// resolveName finds the name the resource is served under: the
// wrapper's, else the payload's own, which must then agree.
func (d *docDecoder) resolveName() bool {
	t, typ := d.t, d.typ
	own := typ.NameOf(d.msg)
	if d.payloadURL != typ.URL {
		own = "" // a redirect's payload names its target, not itself
	}
	n := d.wName
	if n == "" {
		n = own
	}
	if n == "" {
		where := "name"
		if typ.NameField != "" && d.payloadURL == typ.URL {
			where = joinPath(d.resPath, typ.NameField)
		}
		return d.fail(t.errPath(where, "missing: the resource needs a name"))
	}
	canon, err := CheckName(typ, n)
	if err != nil {
		where := "name"
		if d.wName == "" {
			where = joinPath(d.resPath, typ.NameField)
		}
		return d.fail(t.errPath(where, "%v", err))
	}
	d.canon = canon
	if d.payloadURL == typ.URL && typ.NameField != "" {
		if own == "" {
			// A wrapper name fills in an empty payload name, so authors
			// need not write it twice.
			typ.SetNameOf(d.msg, n)
			d.fast = nil
		} else if c, err := CanonicalName(own); err != nil || c != canon {
			return d.fail(t.errPath(joinPath(d.resPath, typ.NameField), "%q differs from the resource name %q: a resource's own name must equal the name it is served under", own, n))
		}
	}
	return true
}

// validate checks the message (a collection's entries were checked one
// by one) and a redirect, and returns the Any contents the check decoded
// when keepAnys.
func (d *docDecoder) validate(keepAnys bool) *docprep.Anys {
	t := d.t
	var anys *docprep.Anys
	if d.body == nil {
		// The walk of the validation reads the encoding, which the fast
		// path made.
		if d.fast == nil {
			var err error
			if d.fast, err = Marshal(d.msg); err != nil {
				d.errs = append(d.errs, t.errAt(d.resOff, d.resPath, "cannot encode: %v", err))
				return nil
			}
		}
		// Each level of JSON nesting is at most three of the encoding (a
		// google.protobuf.Struct: the Struct, a map entry, a Value), and a
		// leaf one more: a document nested no deeper than this cannot
		// reach the limit, and only its Any values need looking into.
		limit := MaxNesting
		if 3*d.deepest+3 <= MaxNesting {
			limit = 0
		}
		var fes []FieldError
		fes, anys = validateKeeping(d.msg, d.fast, 1, limit, keepAnys)
		for _, fe := range fes {
			d.errs = append(d.errs, t.errPath(joinPath(d.resPath, fe.Path), "%s", fe.Msg))
		}
	}
	if d.payloadURL == LocatorURL {
		if err := checkRedirect(d.msg, d.typ); err != nil {
			d.errs = append(d.errs, t.errAt(d.resOff, d.resPath, "%v", err))
		}
	}
	return anys
}
