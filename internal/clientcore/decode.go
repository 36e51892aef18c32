package clientcore

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

// A response is checked in two passes. The first needs nothing but the
// response (and runs the application's Options.Validate): it runs on the
// stream's receiving goroutine, so no user code runs where the client's
// state is. The second needs what the channel subscribes and holds — the
// TP2 parameter check, heartbeats — and runs on the state goroutine. Each
// resource keeps its place, so a NACK lists the reasons in the response's
// order.

// received is a response after the first pass.
type received struct {
	items   []rcvd
	removed []string       // delta removed_resources
	gone    []resource.Key // delta removed_resource_names
	// later: rejections of removals, which come after the resources'.
	later []rejection
}

// rcvd is one resource of a response after the first pass.
type rcvd struct {
	name    string
	cons    constraint.Constraints
	v       *resource.Variant // accepted so far (nil when rejected or without payload)
	ttl     time.Duration     // Resource.ttl (SotW: of a wrapped resource)
	rej     *rejection
	aliases []string // delta (VHDS): the requested names it answers
	// bare: a delta resource without payload — a VHDS not-found answer
	// (with aliases), or a heartbeat of a version held (docs/protocol.md
	// §2.7), which only the second pass can tell.
	bare    bool
	version string
}

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
	// heartbeats: payload-less resources renewing the TTL of the
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

func rejectf(n, format string, args ...any) *rejection {
	msg := fmt.Sprintf(format, args...)
	if n != "" {
		msg = n + ": " + msg
	}
	return &rejection{n, msg}
}

func (d *decoded) reject(r rejection) {
	if r.name != "" {
		if d.bad == nil {
			d.bad = map[string]string{}
		}
		d.bad[r.name] = r.msg
	}
	d.errs = append(d.errs, r.msg)
	d.rejected = append(d.rejected, r)
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
func (c *Client) decodeSotW(r *discoveryv3.DiscoveryResponse) *received {
	rc := &received{}
	seen := map[[2]string]bool{}
	for i, a := range r.Resources {
		var (
			n       string
			cons    constraint.Constraints
			payload = a
			version = r.VersionInfo
			dnc     bool
			ttl     time.Duration
		)
		if a.TypeUrl == resource.WrapperURL {
			var res discoveryv3.Resource
			if err := a.UnmarshalTo(&res); err != nil {
				rc.items = append(rc.items, rcvd{rej: rejectf("", "resource %d: bad wrapper: %v", i, err)})
				continue
			}
			var err error
			n, cons, err = resourceName(&res)
			if err != nil {
				rc.items = append(rc.items, rcvd{rej: rejectf(n, "%v", err)})
				continue
			}
			payload = res.Resource
			dnc = res.GetCacheControl().GetDoNotCache()
			ttl = res.GetTtl().AsDuration()
			if res.GetVersion() != "" {
				// The resource's own version, as delta carries it: the
				// same identifier on both transports and in the server's
				// admin views (the response's version_info still goes in
				// the ACK).
				version = res.GetVersion()
			}
			if payload == nil {
				// A heartbeat (docs/protocol.md §2.7), if the client holds
				// this version: checked tells.
				n = canonicalName(n)
				rc.items = append(rc.items, rcvd{name: n, cons: cons, version: version, ttl: ttl, bare: true})
				continue
			}
		} else {
			m, err := decodePayload(a)
			if err != nil {
				rc.items = append(rc.items, rcvd{rej: rejectf("", "resource %d: %v", i, err)})
				continue
			}
			n = resource.ForURL(r.TypeUrl).NameOf(m)
			if n == "" {
				rc.items = append(rc.items, rcvd{rej: rejectf("", "resource %d: cannot tell its name (unknown type or no name field; use delta or wrapped resources)", i)})
				continue
			}
		}
		n = canonicalName(n)
		k := [2]string{n, cons.Key()}
		if seen[k] {
			rc.items = append(rc.items, rcvd{rej: rejectf(n, "given twice in one response")})
			continue
		}
		seen[k] = true
		v, rej := c.check(r.TypeUrl, n, cons, version, payload, dnc)
		rc.items = append(rc.items, rcvd{name: n, cons: cons, v: v, rej: rej, ttl: ttl})
	}
	return rc
}

// decodeDelta checks a delta response (docs/protocol.md §2.6): no name twice
// across resources and removals; payloads of the response's type; a
// payload-less resource only as a VHDS answer (with aliases) or a heartbeat.
func (c *Client) decodeDelta(r *discoveryv3.DeltaDiscoveryResponse) *received {
	rc := &received{}
	seen := map[[2]string]bool{}
	use := func(n, ck string) bool {
		k := [2]string{n, ck}
		if seen[k] {
			return false
		}
		seen[k] = true
		return true
	}
	twice := func(n string) *rejection { return rejectf(n, "given twice in one response") }
	for _, res := range r.Resources {
		n, cons, err := resourceName(res)
		if err != nil {
			rc.items = append(rc.items, rcvd{rej: rejectf(n, "%v", err)})
			continue
		}
		n = canonicalName(n)
		if !use(n, cons.Key()) {
			rc.items = append(rc.items, rcvd{rej: twice(n)})
			continue
		}
		it := rcvd{name: n, cons: cons, version: res.Version, ttl: res.GetTtl().AsDuration()}
		for _, a := range res.Aliases {
			it.aliases = append(it.aliases, canonicalName(a))
		}
		if res.Resource == nil {
			it.bare = true
		} else {
			it.v, it.rej = c.check(r.TypeUrl, n, cons, res.Version, res.Resource, res.GetCacheControl().GetDoNotCache())
		}
		rc.items = append(rc.items, it)
	}
	for _, n := range r.RemovedResources {
		n = canonicalName(n)
		if use(n, "") {
			rc.removed = append(rc.removed, n)
		} else {
			rc.later = append(rc.later, *twice(n))
		}
	}
	for _, rn := range r.RemovedResourceNames {
		cons, err := constraint.FromProto(rn.GetDynamicParameterConstraints())
		if err != nil {
			rc.later = append(rc.later, *rejectf(rn.GetName(), "removed_resource_names: %v", err))
			continue
		}
		n := canonicalName(rn.GetName())
		if use(n, cons.Key()) {
			rc.gone = append(rc.gone, resource.Key{Type: r.TypeUrl, Name: n, Constraints: cons.Key()})
		} else {
			rc.later = append(rc.later, *twice(n))
		}
	}
	return rc
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

// check validates one resource on its own and makes its variant, or says
// why not: a payload must be of the response's type (or a TP1 redirect),
// decode, pass its validation rules and the client's own check, and carry
// its own name.
func (c *Client) check(typeURL, n string, cons constraint.Constraints, version string, payload *anypb.Any, dnc bool) (*resource.Variant, *rejection) {
	if payload.GetTypeUrl() != typeURL && payload.GetTypeUrl() != resource.LocatorURL {
		return nil, rejectf(n, "is a %s in a %s response", strings.TrimPrefix(payload.GetTypeUrl(), resource.TypePrefix), strings.TrimPrefix(typeURL, resource.TypePrefix))
	}
	typ := resource.ForURL(typeURL)
	v := resource.NewVariant(typ, n, cons, version, payload.GetTypeUrl(), payload.GetValue()).WithDoNotCache(dnc)
	if typ.MessageType() == nil && payload.GetTypeUrl() != resource.LocatorURL {
		return v, nil
	}
	m, err := v.Message()
	if err != nil {
		return nil, rejectf(n, "%v", err)
	}
	if errs := resource.Validate(m); len(errs) > 0 {
		return nil, rejectf(n, "invalid: %v", errs[0])
	}
	if payload.GetTypeUrl() == typeURL {
		if own := typ.NameOf(m); own != "" && canonicalName(own) != n {
			return nil, rejectf(n, "its payload is named %q", own)
		}
	}
	if c.o.Validate != nil {
		if err := c.o.Validate(v, m); err != nil {
			return nil, rejectf(n, "rejected: %v", err)
		}
	}
	return v, nil
}

// checked is the second pass (on the state goroutine): a variant of a TP2
// subscription must match the parameters it was subscribed with (TP2: a
// leaf client MAY check; xdsd does, and rejects a mismatch); a bare delta
// resource is a heartbeat only of a version held.
func (t *upType) checked(rc *received) *decoded {
	d := &decoded{removed: rc.removed, gone: rc.gone}
	for _, it := range rc.items {
		switch {
		case it.rej != nil:
			d.reject(*it.rej)
		case it.bare && len(it.aliases) > 0:
			// On-demand VHDS: not found (docs/protocol.md §5.4).
			d.notFound = append(d.notFound, it.aliases...)
		case it.bare && t.held[it.name] != nil:
			// A heartbeat: the version the client holds (§2.7).
			d.heartbeats = append(d.heartbeats, heartbeat{it.name, it.cons.Key(), it.version, it.ttl})
		case it.bare:
			d.reject(*rejectf(it.name, "a resource without a payload is neither a heartbeat nor a VHDS answer"))
		default:
			sets, legacy := t.paramsFor(it.name)
			if !it.cons.IsZero() && !legacy && len(sets) > 0 && !matchesAny(it.cons, sets) {
				d.reject(*rejectf(it.name, "variant [%s] does not match the dynamic parameters it was subscribed with (%s)", it.cons, sets[0]))
				continue
			}
			v := it.v
			if it.ttl > 0 {
				v.TTL = it.ttl // not yet shared: the variant is new
			}
			d.puts = append(d.puts, v)
			for _, a := range it.aliases {
				if d.aliases == nil {
					d.aliases = map[string]string{}
				}
				d.aliases[a] = it.name
			}
		}
	}
	for _, r := range rc.later {
		d.reject(r)
	}
	return d
}

func matchesAny(c constraint.Constraints, sets []constraint.Params) bool {
	for _, p := range sets {
		if c.Match(p) {
			return true
		}
	}
	return false
}
