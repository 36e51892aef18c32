package resource

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/constraint"
)

// Key identifies one variant: a resource's type, canonical name and
// canonical constraints (TP2: constraints are part of a variant's identity).
type Key struct {
	Type        string // type URL
	Name        string // canonical name
	Constraints string // constraint.Constraints.Key(); "" when unconstrained
}

func (k Key) String() string {
	if k.Constraints == "" {
		return fmt.Sprintf("%s %s", k.Type, k.Name)
	}
	return fmt.Sprintf("%s %s [%s]", k.Type, k.Name, k.Constraints)
}

// Variant is one variant of a named resource: a payload with the TP2
// constraints that select it and the version that last changed it. It is
// immutable once made, and its payload is encoded exactly once, when it is
// made; responses are assembled from those bytes and never re-marshal it
// (docs/architecture.md §5). How a variant is framed in a discovery
// response is not the model's business: the server's wire engine keeps
// those encodings itself.
type Variant struct {
	// Type is the type the resource is served as, i.e. the type clients
	// subscribe to.
	Type *Type
	// Name is the resource's canonical name.
	Name string
	// Constraints select which subscribers get this variant.
	Constraints constraint.Constraints
	// Version is the store revision that last changed the variant (or the
	// version an upstream server gave it).
	Version string
	// PayloadURL is the payload's type URL. It equals Type.URL except for a
	// redirect, whose payload is an xds.core.v3.ResourceLocator.
	PayloadURL string
	// DoNotCache carries Resource.cache_control.do_not_cache from upstream.
	DoNotCache bool
	// TTL, when positive, is Resource.ttl (docs/protocol.md §2.7): a client that
	// supports it drops the variant unless the server resends it or sends
	// a heartbeat within the TTL, so configuration does not outlive contact
	// with the control plane.
	TTL time.Duration

	any     []byte // encoded google.protobuf.Any
	bodyOff int    // the payload starts at any[bodyOff:]
}

// NewVariant makes a variant from an already marshaled payload. Marshal the
// payload deterministically (see Marshal) so that unchanged content keeps
// equal bytes.
func NewVariant(t *Type, name string, c constraint.Constraints, version, payloadURL string, body []byte) *Variant {
	if payloadURL == "" {
		payloadURL = t.URL
	}
	any := make([]byte, 0, len(payloadURL)+len(body)+12)
	any = protowire.AppendTag(any, 1, protowire.BytesType)
	any = protowire.AppendString(any, payloadURL)
	any = protowire.AppendTag(any, 2, protowire.BytesType)
	any = protowire.AppendVarint(any, uint64(len(body)))
	off := len(any)
	any = append(any, body...)
	return &Variant{Type: t, Name: name, Constraints: c, Version: version, PayloadURL: payloadURL, any: any, bodyOff: off}
}

// WithVersion returns a copy of v carrying another version; the payload
// bytes are shared, not copied.
func (v *Variant) WithVersion(version string) *Variant {
	return &Variant{Type: v.Type, Name: v.Name, Constraints: v.Constraints, Version: version,
		PayloadURL: v.PayloadURL, DoNotCache: v.DoNotCache, TTL: v.TTL, any: v.any, bodyOff: v.bodyOff}
}

// WithDoNotCache returns a copy of v with DoNotCache set as given.
func (v *Variant) WithDoNotCache(b bool) *Variant {
	c := v.WithVersion(v.Version)
	c.DoNotCache = b
	return c
}

// Key returns the variant's identity.
func (v *Variant) Key() Key {
	return Key{Type: v.Type.URL, Name: v.Name, Constraints: v.Constraints.Key()}
}

// Body is the marshaled payload message.
func (v *Variant) Body() []byte { return v.any[v.bodyOff:] }

// Any is the payload encoded as a google.protobuf.Any message.
func (v *Variant) Any() []byte { return v.any }

// Size is the encoded payload size in bytes.
func (v *Variant) Size() int { return len(v.any) - v.bodyOff }

// IsRedirect reports whether the payload is a TP1 redirect.
func (v *Variant) IsRedirect() bool { return v.PayloadURL == LocatorURL && v.Type.URL != LocatorURL }

// SameContent reports whether w has the same payload and constraints as v,
// whatever their versions.
func (v *Variant) SameContent(w *Variant) bool {
	return w != nil && v.PayloadURL == w.PayloadURL && v.Constraints.Equal(w.Constraints) &&
		v.DoNotCache == w.DoNotCache && v.TTL == w.TTL && string(v.Body()) == string(w.Body())
}

// Message decodes the payload. It fails for payload types this binary does
// not know.
func (v *Variant) Message() (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(v.PayloadURL)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", v.Name, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(v.Body(), m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", v.Name, err)
	}
	return m, nil
}

// Marshal encodes a payload deterministically, so that equal content gives
// equal bytes and an unchanged re-apply changes no version.
func Marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
