package protocol

import (
	"container/list"
	"hash/maphash"
	"slices"
	"sync"
	"time"
	"unsafe"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// item is one resource in a response.
type item struct {
	v *resource.Variant // nil: an on-demand VHDS not-found answer
	// name is the name the resource goes under: v.Name, or for a not-found
	// answer the requested name.
	name string
	// tp2 names the resource by resource_name with its constraints.
	tp2 bool
	// wrap (SotW) sends the resource inside a discovery Resource.
	wrap bool
	// ttl sends the variant's TTL (docs/protocol.md §2.7); over SotW, in a
	// wrapped resource.
	ttl bool
	// heartbeat (delta) sends only name, version and TTL: the client holds
	// this version, and its TTL is renewed.
	heartbeat bool
	// aliases (VHDS) lists the requested names the virtual host answers.
	aliases []string
	// forced items are sent even when the client holds them: a newly
	// subscribed name is always answered (docs/protocol.md §1.6, §2.2).
	forced bool
}

// removal is one variant a delta client must drop by resource_name.
type removal struct {
	name string
	cons *discoveryv3.DynamicParameterConstraints
	ckey string
}

// response describes one response before it gets a nonce.
type response struct {
	typeURL string
	sotw    bool
	// version is SotW's version_info, or delta's system_version_info.
	version string
	items   []item
	// removed and removedNames are delta's removed_resources and
	// removed_resource_names.
	removed      []string
	removedNames []removal

	// The body, encoded once however many streams send it.
	once sync.Once
	body []byte
}

// encoded returns r's body, encoding it (or finding it in the cache) once.
func (r *response) encoded(c *bodyCache) []byte {
	r.once.Do(func() { r.body = c.body(r) })
	return r.body
}

func (r *response) empty() bool {
	return len(r.items) == 0 && len(r.removed) == 0 && len(r.removedNames) == 0
}

// Field numbers of DiscoveryResponse and DeltaDiscoveryResponse.
const (
	sotwVersion   = 1
	sotwResources = 2
	sotwTypeURL   = 4
	sotwNonce     = 5

	deltaSystemVersion = 1
	deltaResources     = 2
	deltaTypeURL       = 4
	deltaNonce         = 5
	deltaRemoved       = 6
	deltaRemovedNames  = 8

	// discovery.v3.Resource
	resourceVersion      = 1
	resourcePayload      = 2
	resourceName         = 3
	resourceAliases      = 4
	resourceTTL          = 6
	resourceCacheControl = 7
	resourceLocatorName  = 8 // resource_name: name and TP2 constraints
)

// encode builds the body of r: every field but the nonce; ft holds the
// variants' fragments.
func (r *response) encode(ft *fragTable) []byte {
	size := len(r.typeURL) + len(r.version) + 16
	for _, it := range r.items {
		if it.v != nil {
			size += len(it.v.Any()) + 64 + len(it.v.Name)
		}
	}
	b := make([]byte, 0, size)
	if r.sotw {
		b = protowire.AppendTag(b, sotwVersion, protowire.BytesType)
		b = protowire.AppendString(b, r.version)
		for _, it := range r.items {
			b = protowire.AppendTag(b, sotwResources, protowire.BytesType)
			if it.heartbeat {
				b = protowire.AppendBytes(b, ft.of(it.v).wrappedBeat(it.tp2))
				continue
			}
			if !it.wrap {
				b = protowire.AppendBytes(b, it.v.Any())
				continue
			}
			f := ft.of(it.v)
			wh, rh, a := f.wrapped(it.tp2, it.ttl), f.header(it.tp2, it.ttl), it.v.Any()
			b = protowire.AppendVarint(b, uint64(len(wh)+len(rh)+len(a)))
			b = append(append(append(b, wh...), rh...), a...)
		}
		b = protowire.AppendTag(b, sotwTypeURL, protowire.BytesType)
		return protowire.AppendString(b, r.typeURL)
	}
	b = protowire.AppendTag(b, deltaSystemVersion, protowire.BytesType)
	b = protowire.AppendString(b, r.version)
	for _, it := range r.items {
		b = protowire.AppendTag(b, deltaResources, protowire.BytesType)
		if it.heartbeat {
			b = protowire.AppendBytes(b, ft.of(it.v).beat(it.tp2))
			continue
		}
		if it.v != nil && len(it.aliases) == 0 {
			rh, a := ft.of(it.v).header(it.tp2, it.ttl), it.v.Any()
			b = protowire.AppendVarint(b, uint64(len(rh)+len(a)))
			b = append(append(b, rh...), a...)
			continue
		}
		b = protowire.AppendBytes(b, encodeAliased(ft, it, r.version))
	}
	b = protowire.AppendTag(b, deltaTypeURL, protowire.BytesType)
	b = protowire.AppendString(b, r.typeURL)
	for _, n := range r.removed {
		b = protowire.AppendTag(b, deltaRemoved, protowire.BytesType)
		b = protowire.AppendString(b, n)
	}
	for _, rm := range r.removedNames {
		rn, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&discoveryv3.ResourceName{Name: rm.name, DynamicParameterConstraints: rm.cons})
		b = protowire.AppendTag(b, deltaRemovedNames, protowire.BytesType)
		b = protowire.AppendBytes(b, rn)
	}
	return b
}

// encodeAliased encodes a VHDS answer: the virtual host named as itself
// with the requested names in aliases, or, when not found, a payload-less
// Resource named and aliased as requested (on-demand VHDS, docs/protocol.md §5.4).
// The virtual host's bytes are the variant's own (never re-marshaled);
// streams asking by the same names share the whole body through bodyCache.
func encodeAliased(ft *fragTable, it item, version string) []byte {
	var b []byte
	if it.v == nil {
		b = protowire.AppendTag(b, resourceName, protowire.BytesType)
		b = protowire.AppendString(b, it.name)
		b = protowire.AppendTag(b, resourceVersion, protowire.BytesType)
		b = protowire.AppendString(b, version)
	} else {
		rh, a := ft.of(it.v).header(it.tp2, it.ttl), it.v.Any()
		b = make([]byte, 0, len(rh)+len(a)+16*len(it.aliases))
		b = append(append(b, rh...), a...)
	}
	for _, al := range it.aliases {
		b = protowire.AppendTag(b, resourceAliases, protowire.BytesType)
		b = protowire.AppendString(b, al)
	}
	return b
}

// bodyCache shares encoded bodies between streams that get the same
// response: N streams with the same subscription cost one encoding per
// change, not N (docs/architecture.md §5). Entries are found by a hash of the response
// and checked item by item, so a collision costs a miss, never a wrong
// response.
type bodyCache struct {
	frags *fragTable // the variants' encodings, shared by every body

	mu       sync.Mutex
	seed     maphash.Seed
	entries  map[uint64]*list.Element
	lru      list.List
	bytes    int
	maxBytes int
}

type cached struct {
	hash uint64
	resp *response
	body []byte
	used time.Time
}

// cacheIdle is how long a shared encoding is kept unused: streams in step
// share a body within a round, and a body nobody asked for since is most
// likely one no stream will ask for again (a churning client's own name
// set, an old revision), so memory follows what streams are doing rather
// than filling up to the cache's bound.
const cacheIdle = 10 * time.Second

// cost is what an entry holds: its body and the response it was built
// from.
func (e *cached) cost() int {
	return len(e.body) + 64*(len(e.resp.items)+len(e.resp.removed)+len(e.resp.removedNames))
}

// clear drops every cached encoding.
func (c *bodyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[uint64]*list.Element{}
	c.lru.Init()
	c.bytes = 0
}

func newBodyCache(maxBytes int) *bodyCache {
	return &bodyCache{frags: &fragTable{}, seed: maphash.MakeSeed(), entries: map[uint64]*list.Element{}, maxBytes: maxBytes}
}

func (c *bodyCache) hash(r *response) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(r.typeURL)
	h.WriteString(r.version)
	var buf [9]byte
	for _, it := range r.items {
		p := uintptr(unsafe.Pointer(it.v))
		for i := range 8 {
			buf[i] = byte(p >> (8 * i))
		}
		buf[8] = flags(it)
		h.Write(buf[:])
		if it.v == nil {
			h.WriteString(it.name)
			h.WriteByte(0)
		}
		for _, a := range it.aliases {
			h.WriteString(a)
			h.WriteByte(0)
		}
		h.WriteByte(1)
	}
	for _, n := range r.removed {
		h.WriteString(n)
		h.WriteByte(0)
	}
	for _, rm := range r.removedNames {
		h.WriteString(rm.name)
		h.WriteByte(0)
		h.WriteString(rm.ckey)
		h.WriteByte(0)
	}
	if r.sotw {
		h.WriteByte(1)
	}
	return h.Sum64()
}

func flags(it item) byte {
	var f byte
	if it.tp2 {
		f |= 1
	}
	if it.wrap {
		f |= 2
	}
	if it.ttl {
		f |= 4
	}
	if it.heartbeat {
		f |= 8
	}
	return f
}

func sameResponse(a, b *response) bool {
	if a.typeURL != b.typeURL || a.version != b.version || a.sotw != b.sotw ||
		len(a.items) != len(b.items) || len(a.removed) != len(b.removed) || len(a.removedNames) != len(b.removedNames) {
		return false
	}
	for i := range a.items {
		x, y := a.items[i], b.items[i]
		if x.v != y.v || flags(x) != flags(y) || (x.v == nil && x.name != y.name) || !slices.Equal(x.aliases, y.aliases) {
			return false
		}
	}
	for i := range a.removed {
		if a.removed[i] != b.removed[i] {
			return false
		}
	}
	for i := range a.removedNames {
		if a.removedNames[i].name != b.removedNames[i].name || a.removedNames[i].ckey != b.removedNames[i].ckey {
			return false
		}
	}
	return true
}

// body returns r's encoding, from the cache when another stream already
// built the same response.
func (c *bodyCache) body(r *response) []byte {
	if c == nil {
		return r.encode(nil)
	}
	h := c.hash(r)
	c.mu.Lock()
	if el, ok := c.entries[h]; ok {
		e := el.Value.(*cached)
		if sameResponse(e.resp, r) {
			c.lru.MoveToFront(el)
			e.used = time.Now()
			c.mu.Unlock()
			return e.body
		}
	}
	c.mu.Unlock()
	body := r.encode(c.frags)
	if len(body) > c.maxBytes/4 {
		return body
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[h]; ok {
		c.bytes -= el.Value.(*cached).cost()
		c.lru.Remove(el)
	}
	now := time.Now()
	e := &cached{hash: h, resp: r, body: body, used: now}
	c.entries[h] = c.lru.PushFront(e)
	c.bytes += e.cost()
	for el := c.lru.Back(); el != nil; el = c.lru.Back() {
		old := el.Value.(*cached)
		if c.bytes <= c.maxBytes && now.Sub(old.used) < cacheIdle {
			break
		}
		c.lru.Remove(el)
		delete(c.entries, old.hash)
		c.bytes -= old.cost()
	}
	return body
}
