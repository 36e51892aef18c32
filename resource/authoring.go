package resource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/protojsonerr"
	"github.com/xdsd/xdsd/resource/internal/pbjson"
)

// Document is one authored resource variant, decoded and validated.
type Document struct {
	Location
	// Variant has no version: the store gives it one when it is applied.
	Variant *Variant
	// Message is the decoded payload.
	Message proto.Message
	// Raw is the document as JSON, as written (YAML converted).
	Raw json.RawMessage

	text    *docText
	resPath string // where the payload is in the document: "" or "resource"
}

// ErrorAt is an error about a field of the payload (a path from the
// payload's root, as Validate writes it), placed where the document
// writes the field, or the deepest part of its path that it writes.
func (d *Document) ErrorAt(path, format string, args ...any) *DocError {
	p := joinPath(d.resPath, path)
	if d.text == nil {
		return d.Location.errorf(p, format, args...)
	}
	return d.text.errPath(p, format, args...)
}

var wrapperKeys = map[string]bool{"name": true, "type": true, "constraints": true, "resource": true, "do_not_cache": true, "ttl": true}

// MinTTL is the shortest TTL a resource may have: a client holding it is
// sent a heartbeat every half TTL.
const MinTTL = 100 * time.Millisecond

// find returns the member of ms with key k.
func find(ms []member, k string) (member, bool) {
	for _, m := range ms {
		if m.key == k {
			return m, true
		}
	}
	return member{}, false
}

// protojsonOnly turns the fast path off, for tests that compare it with
// protojson.
var protojsonOnly atomic.Bool

// preread is a bare resource the fast path read.
type preread struct {
	mt   protoreflect.MessageType
	body []byte
}

// readBare reads a document that is a bare resource (its "@type" at the
// top) with the fast path, returning nil if it is not one or the fast path
// does not take it; and how deeply the document nests.
func readBare(js []byte) (*preread, int) {
	if protojsonOnly.Load() {
		return nil, 0
	}
	url, ok := pbjson.TypeOf(js)
	if !ok {
		return nil, 0
	}
	if !strings.Contains(url, "/") {
		url = TypePrefix + url
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	if err != nil {
		return nil, 0
	}
	b, depth, ok := pbjson.Transcode(js, mt.Descriptor(), true)
	if !ok {
		return nil, 0
	}
	return &preread{mt: mt, body: b}, depth
}

// unmarshal decodes the JSON of a message, a piece of the document's
// JSON that starts at offset base, and reports a failure where it is.
// protojson's error says where only in its text, which is not to be
// parsed: protojsonerr finds the place and the cause from the structure.
func (t *docText) unmarshal(js []byte, base int, m proto.Message) *DocError {
	err := protojson.Unmarshal(js, m)
	if err == nil {
		return nil
	}
	e := protojsonerr.Explain(js, m.ProtoReflect().Descriptor(), protojsonerr.Options{})
	if e == nil {
		// A cause the walk does not model (nesting past protojson's
		// limit): protojson's own words, at the start of the message.
		return t.errAt(base, pathAt(t.js, base), "cannot decode as %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	msg, off := e.Msg, base+e.Offset
	if e.UnknownType != "" {
		msg = unknownType(e.UnknownType, false)
	}
	return t.errAt(off, pathAt(t.js, off), "%s", msg)
}

// noConstraints ends the error for a constraints field that is present
// but says nothing. It is most often `constraints: !exists(version)`
// unquoted, which YAML reads as a tag on an empty value; taking it as
// unconstrained would serve the variant to every client.
const noConstraints = `leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`

func decodeConstraints(r json.RawMessage) (constraint.Constraints, error) {
	if string(bytes.TrimSpace(r)) == "null" {
		return constraint.Constraints{}, errors.New("null: " + noConstraints)
	}
	var s string
	if err := json.Unmarshal(r, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return constraint.Constraints{}, errors.New("empty: " + noConstraints)
		}
		return constraint.Parse(s)
	}
	var p discoveryv3.DynamicParameterConstraints
	if err := protojson.Unmarshal(r, &p); err != nil {
		why := any(err)
		if e := protojsonerr.Explain(r, p.ProtoReflect().Descriptor(), protojsonerr.Options{}); e != nil {
			why = e.Msg
		}
		return constraint.Constraints{}, fmt.Errorf("neither constraint text (a string) nor DynamicParameterConstraints JSON: %v", why)
	}
	return constraint.FromProto(&p)
}

// SetCheck finds what a set of documents meant to be applied together may
// not hold: a variant defined twice, and variants of one resource that
// break TP2's rules (different key sets, or two that can match the same
// parameters; constraint.ValidateVariants). Add each document, then ask
// Errs. It keeps the identity and place of each variant, not the
// document.
type SetCheck struct {
	// groups holds the first variant of each resource, an index into
	// entries, where each variant links to the next of its resource. A
	// variant defined twice is one of them with the same constraints. (A
	// map of each resource's variants and another of every Key took 30 MB
	// for 100,000 resources; this takes 13.)
	groups map[[2]string]int32
	// entries in chunks of setChunk: a slice grown by doubling would
	// leave its old arrays to the collector, up to half again as much.
	chunks [][]setEntry
	n      int32
	errs   ErrorList
}

const setChunk = 4096

func (s *SetCheck) entry(i int32) *setEntry { return &s.chunks[i/setChunk][i%setChunk] }

type setEntry struct {
	c    constraint.Constraints
	loc  Location
	at   *DocError // where the constraints are written
	next int32     // the resource's next variant; -1 for none
}

// Add checks one more document against those added before.
func (s *SetCheck) Add(d *Document) {
	if s.groups == nil {
		s.groups = map[[2]string]int32{}
	}
	v := d.Variant
	g := [2]string{v.Type.URL, v.Name}
	first, ok := s.groups[g]
	last := int32(-1)
	if ok {
		// (A resource has few variants; thousands of one would make
		// ValidateVariants' pairwise checks the slow part, not this.)
		for i := first; i >= 0; i = s.entry(i).next {
			if o := s.entry(i); o.c.Key() == v.Constraints.Key() {
				s.errs = append(s.errs, d.Location.errorf("", "%s is defined twice; first in %s", describe(v), o.loc))
				return
			}
			last = i
		}
	}
	e := setEntry{c: v.Constraints, loc: d.Location, next: -1}
	if d.text != nil && !e.c.IsZero() {
		e.at = d.text.errPath("constraints", "")
	}
	i := s.n
	if i%setChunk == 0 {
		s.chunks = append(s.chunks, make([]setEntry, 0, setChunk))
	}
	s.chunks[len(s.chunks)-1] = append(s.chunks[len(s.chunks)-1], e)
	s.n++
	if ok {
		s.entry(last).next = i
	} else {
		s.groups[g] = i
	}
}

// Errs lists every problem of the set added so far.
func (s *SetCheck) Errs() ErrorList {
	errs := append(ErrorList(nil), s.errs...)
	type several struct {
		g     [2]string
		first int32
	}
	var gs []several
	for g, first := range s.groups {
		if s.entry(first).next >= 0 {
			gs = append(gs, several{g, first})
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].first < gs[j].first }) // in the order added
	for _, x := range gs {
		var es []*setEntry
		for i := x.first; i >= 0; i = s.entry(i).next {
			es = append(es, s.entry(i))
		}
		vs := make([]constraint.Variant, len(es))
		for i, e := range es {
			vs[i] = constraint.Variant{ID: variantID(e.c, e.loc), Constraints: e.c}
		}
		if err := constraint.ValidateVariants(vs); err != nil {
			e := es[0].loc.errorf("constraints", "variants of %s %s: %v", ForURL(x.g[0]).Name, x.g[1], err)
			if at := es[0].at; at != nil {
				e.Line, e.Column = at.Line, at.Column
			}
			errs = append(errs, e)
		}
	}
	return errs
}

// ValidateSet checks a set of documents meant to be applied together, as
// SetCheck does.
func ValidateSet(docs []*Document) error {
	var s SetCheck
	for _, d := range docs {
		s.Add(d)
	}
	return s.Errs().err()
}

func variantID(c constraint.Constraints, loc Location) string {
	s := c.String()
	if s == "" {
		s = "(unconstrained)"
	}
	if l := loc.String(); l != "" {
		return fmt.Sprintf("%q (%s)", s, l)
	}
	return fmt.Sprintf("%q", s)
}

func describe(v *Variant) string {
	s := v.Type.Name + " " + v.Name
	if !v.Constraints.IsZero() {
		s += " [" + v.Constraints.String() + "]"
	}
	return s
}
