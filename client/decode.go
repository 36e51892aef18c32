package client

import (
	"fmt"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// decoded is one response, checked: what to store, what to drop, and why
// anything was rejected.
type decoded struct {
	puts    []*resource.Variant
	gone    []resource.Key // variants removed (removed_resource_names, SotW omission)
	removed []string       // names removed (removed_resources)
	emptied []string       // names whose last variant was removed
	errs    []string       // NACK reasons, one per rejected resource
	bad     map[string]string
	// rejected: errs with the names they reject ("" when unknown).
	rejected []rejection
	// VHDS: requested names the answer covers, and those not found.
	aliases  map[string]string // alias → virtual host name
	notFound []string
	// heartbeats (delta): payload-less resources renewing the TTL of the
	// version held (docs/protocol.md §2.7).
	heartbeats []heartbeat
	// noVariant: TP2 subscriptions a full-state response answered with
	// variants of the name, none for their parameters.
	noVariant []db.Key
	// answered: the names the response told something of, on stream gen.
	answered []string
	gen      int
}

type heartbeat struct {
	name, ckey, version string
	ttl                 time.Duration
}

func (d *decoded) reject(n, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n != "" {
		msg = n + ": " + msg
		if d.bad == nil {
			d.bad = map[string]string{}
		}
		d.bad[n] = msg
	}
	d.errs = append(d.errs, msg)
	d.rejected = append(d.rejected, rejection{n, msg})
}

func canonicalName(n string) string {
	u, err := name.ParseURN(n)
	if err != nil {
		return n
	}
	return u.String()
}

// decodeSotW checks a SotW response's resources (docs/protocol.md §1.7,
// §1.10): each of the response's type, or wrapped in a discovery Resource;
// no name given twice.
func (ch *channel) decodeSotW(t *upType, r *discoveryv3.DiscoveryResponse) *decoded {
	d := &decoded{}
	seen := map[[2]string]bool{}
	for i, a := range r.Resources {
		var (
			n       string
			cons    constraint.Constraints
			payload = a
			version = r.VersionInfo
			dnc     bool
		)
		if a.TypeUrl == resource.WrapperURL {
			var res discoveryv3.Resource
			if err := a.UnmarshalTo(&res); err != nil {
				d.reject("", "resource %d: bad wrapper: %v", i, err)
				continue
			}
			var err error
			n, cons, err = resourceName(&res)
			if err != nil {
				d.reject(n, "%v", err)
				continue
			}
			payload = res.Resource
			dnc = res.GetCacheControl().GetDoNotCache()
			if res.GetVersion() != "" {
				// The resource's own version, as delta carries it: the
				// same identifier on both transports and in the server's
				// admin views (the response's version_info still goes in
				// the ACK).
				version = res.GetVersion()
			}
			if payload == nil {
				d.reject(n, "wrapped resource without a payload")
				continue
			}
		} else {
			m, err := decodePayload(a)
			if err != nil {
				d.reject("", "resource %d: %v", i, err)
				continue
			}
			n = resource.ForURL(t.url).NameOf(m)
			if n == "" {
				d.reject("", "resource %d: cannot tell its name (unknown type or no name field; use delta or wrapped resources)", i)
				continue
			}
		}
		n = canonicalName(n)
		k := [2]string{n, cons.Key()}
		if seen[k] {
			d.reject(n, "given twice in one response")
			continue
		}
		seen[k] = true
		if v := ch.check(t, d, n, cons, version, payload, dnc); v != nil {
			d.puts = append(d.puts, v)
		}
	}
	return d
}

// decodeDelta checks a delta response (docs/protocol.md §2.6): no name twice
// across resources and removals; payloads of the response's type; a
// payload-less resource only as a VHDS answer (with aliases) or a heartbeat.
func (ch *channel) decodeDelta(t *upType, r *discoveryv3.DeltaDiscoveryResponse) *decoded {
	d := &decoded{}
	seen := map[[2]string]bool{}
	use := func(n, ck string) bool {
		k := [2]string{n, ck}
		if seen[k] {
			d.reject(n, "given twice in one response")
			return false
		}
		seen[k] = true
		return true
	}
	for _, res := range r.Resources {
		n, cons, err := resourceName(res)
		if err != nil {
			d.reject(n, "%v", err)
			continue
		}
		n = canonicalName(n)
		if !use(n, cons.Key()) {
			continue
		}
		if res.Resource == nil {
			switch {
			case len(res.Aliases) > 0:
				// On-demand VHDS: not found (docs/protocol.md §5.4).
				for _, a := range res.Aliases {
					d.notFound = append(d.notFound, canonicalName(a))
				}
			case t.held[n] != nil:
				// A heartbeat: the version the client holds (§2.7).
				d.heartbeats = append(d.heartbeats, heartbeat{n, cons.Key(), res.Version, res.GetTtl().AsDuration()})
			default:
				d.reject(n, "a resource without a payload is neither a heartbeat nor a VHDS answer")
			}
			continue
		}
		v := ch.check(t, d, n, cons, res.Version, res.Resource, res.GetCacheControl().GetDoNotCache())
		if v == nil {
			continue
		}
		v.TTL = res.GetTtl().AsDuration() // before anything encodes it
		d.puts = append(d.puts, v)
		for _, a := range res.Aliases {
			if d.aliases == nil {
				d.aliases = map[string]string{}
			}
			d.aliases[canonicalName(a)] = n
		}
	}
	for _, n := range r.RemovedResources {
		n = canonicalName(n)
		if use(n, "") {
			d.removed = append(d.removed, n)
		}
	}
	for _, rn := range r.RemovedResourceNames {
		c, err := constraint.FromProto(rn.GetDynamicParameterConstraints())
		if err != nil {
			d.reject(rn.GetName(), "removed_resource_names: %v", err)
			continue
		}
		n := canonicalName(rn.GetName())
		if use(n, c.Key()) {
			d.gone = append(d.gone, resource.Key{Type: t.url, Name: n, Constraints: c.Key()})
		}
	}
	return d
}

// resourceName reads a discovery Resource's name and TP2 constraints.
func resourceName(res *discoveryv3.Resource) (string, constraint.Constraints, error) {
	if rn := res.GetResourceName(); rn != nil {
		if res.Name != "" {
			return rn.GetName(), constraint.Constraints{}, fmt.Errorf("both name and resource_name are set")
		}
		c, err := constraint.FromProto(rn.GetDynamicParameterConstraints())
		if err != nil {
			return rn.GetName(), c, err
		}
		return rn.GetName(), c, nil
	}
	if res.Name == "" {
		return "", constraint.Constraints{}, fmt.Errorf("a resource without a name")
	}
	return res.Name, constraint.Constraints{}, nil
}

func decodePayload(a *anypb.Any) (proto.Message, error) {
	m, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
	if err != nil {
		return nil, fmt.Errorf("cannot decode %s: %v", a.GetTypeUrl(), err)
	}
	return m, nil
}

// check validates one resource and makes its variant, or records why not.
// A payload must be of the subscribed type (or a TP1 redirect), decode,
// pass its validation rules and the client's own check, carry its own name,
// and — for a TP2 subscription — match the parameters it was subscribed
// with (TP2: a leaf client MAY check; xdsd does, and rejects a mismatch).
func (ch *channel) check(t *upType, d *decoded, n string, cons constraint.Constraints, version string, payload *anypb.Any, dnc bool) *resource.Variant {
	if payload.GetTypeUrl() != t.url && payload.GetTypeUrl() != resource.LocatorURL {
		d.reject(n, "is a %s in a %s response", strings.TrimPrefix(payload.GetTypeUrl(), resource.TypePrefix), strings.TrimPrefix(t.url, resource.TypePrefix))
		return nil
	}
	typ := resource.ForURL(t.url)
	v := resource.NewVariant(typ, n, cons, version, payload.GetTypeUrl(), payload.GetValue()).WithDoNotCache(dnc)
	if typ.MessageType() != nil || payload.GetTypeUrl() == resource.LocatorURL {
		m, err := v.Message()
		if err != nil {
			d.reject(n, "%v", err)
			return nil
		}
		if errs := resource.Validate(m); len(errs) > 0 {
			d.reject(n, "invalid: %v", errs[0])
			return nil
		}
		if payload.GetTypeUrl() == t.url {
			if own := typ.NameOf(m); own != "" && canonicalName(own) != n {
				d.reject(n, "its payload is named %q", own)
				return nil
			}
		}
		if ch.c.o.Validate != nil {
			if err := ch.c.o.Validate(v, m); err != nil {
				d.reject(n, "rejected: %v", err)
				return nil
			}
		}
	}
	sets, legacy := t.paramsFor(n)
	if !cons.IsZero() && !legacy && len(sets) > 0 {
		ok := false
		for _, p := range sets {
			if cons.Match(p) {
				ok = true
				break
			}
		}
		if !ok {
			d.reject(n, "variant [%s] does not match the dynamic parameters it was subscribed with (%s)", cons, sets[0])
			return nil
		}
	}
	return v
}
