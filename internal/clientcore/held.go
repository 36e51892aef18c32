package clientcore

import (
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// What a channel holds, and how responses change it: the channel keeps,
// per type, the variants it provided to the db (held), which is what a
// full-state SotW response deletes from, what a TP2 variant supersedes,
// what a reconnecting delta stream declares, and what TTLs expire. Every
// function here runs on the client's state goroutine.

// handleSotW applies a SotW response: the valid resources go to the db, the
// invalid ones are NACKed with the reason while their last good value
// stays; a full-state type's missing resources are deleted (§1.7).
func (ch *channel) handleSotW(r *discoveryv3.DiscoveryResponse, rc *received, srv clientdata.ServerConfig) {
	t := ch.types[r.TypeUrl]
	if t == nil {
		return
	}
	t.nonce = r.Nonce
	ch.responses++
	batch := t.checked(rc)
	if len(batch.errs) == 0 {
		t.version = r.VersionInfo
	} else {
		ch.nackCount++
	}
	// A NACK not sent yet, overtaken by this response, is not lost: over
	// SotW a request carries the newest nonce (§1.1), and a server ignores
	// one with an older nonce (§1.8), so the request answering this
	// response reports what it did not supersede.
	rs := append(unsuperseded(t.ack, batch, resource.ForURL(r.TypeUrl).FullState), batch.rejected...)
	if len(rs) == 0 {
		t.ack = &pendingAck{version: r.VersionInfo, nonce: r.Nonce}
	} else {
		t.ack = nack(t.version, r.Nonce, rs)
	}
	if resource.ForURL(r.TypeUrl).FullState {
		t.sent.answered(batch.puts)
	}
	fullState := resource.ForURL(r.TypeUrl).FullState && !hasFeature(srv, "ignore_resource_deletion")
	if !fullState {
		supersede(t, batch)
	}
	up := ch.apply(t, batch, fullState)
	ch.received += int64(len(batch.puts))
	ch.logNACK(srv, r.TypeUrl, r.VersionInfo, batch)
	ch.c.applied(ch, r.TypeUrl, up, batch)
}

// unsuperseded returns the rejections of a NACK not sent yet (prev) that
// a newer SotW response b leaves standing: those of resources it does not
// hold, reject again or delete. A full-state response holds the whole
// type (§1.7), so it supersedes them all; a rejection that names no
// resource stands.
func unsuperseded(prev *pendingAck, b *decoded, fullState bool) []rejection {
	if prev == nil || len(prev.rejected) == 0 || fullState {
		return nil
	}
	touched := map[string]bool{}
	for _, v := range b.puts {
		touched[v.Name] = true
	}
	for _, r := range b.rejected {
		touched[r.name] = true
	}
	for _, k := range b.gone {
		touched[k.Name] = true
	}
	for _, n := range b.removed {
		touched[n] = true
	}
	var out []rejection
	for _, r := range prev.rejected {
		if r.name == "" || !touched[r.name] {
			out = append(out, r)
		}
	}
	return out
}

// logNACK logs a response rejected (in part), with the reasons.
func (ch *channel) logNACK(srv clientdata.ServerConfig, typeURL, version string, b *decoded) {
	if len(b.errs) > 0 {
		ch.c.o.Logger.Warn("xDS response rejected (NACK)", "server", srv.URI, "type", typeURL, "version", version, "reason", strings.Join(b.errs, "; "))
	}
}

func hasFeature(s clientdata.ServerConfig, f string) bool {
	for _, x := range s.ServerFeatures {
		if x == f {
			return true
		}
	}
	return false
}

// handleDelta applies a delta response (§2).
func (ch *channel) handleDelta(r *discoveryv3.DeltaDiscoveryResponse, rc *received, srv clientdata.ServerConfig) {
	t := ch.types[r.TypeUrl]
	if t == nil {
		return
	}
	ch.responses++
	batch := t.checked(rc)
	if t.ack != nil && t.ack.err != "" {
		// A NACK not sent yet goes before this response's acknowledgement.
		t.nacks = append(t.nacks, t.ack)
	}
	t.ack = &pendingAck{nonce: r.Nonce}
	if len(batch.errs) > 0 {
		t.ack = nack("", r.Nonce, batch.rejected)
		ch.nackCount++
	}
	// A server tells a replaced variant's deletion in the same response
	// (TP2), but cannot when it did not know the client held it (declared
	// by a version that no longer exists after a reconnect).
	supersede(t, batch)
	up := ch.apply(t, batch, false)
	ch.received += int64(len(batch.puts))
	ch.logNACK(srv, r.TypeUrl, r.SystemVersionInfo, batch)
	ch.c.applied(ch, r.TypeUrl, up, batch)
}

// supersede drops the held variants that a response replaces without
// saying so. A SotW response that is not full state cannot
// tell that a variant went, nor a delta server that did not know the
// client held it; but a server sends a TP2 subscription the one
// variant that matches its parameters, and a resource's variants never
// overlap (docs/protocol.md §4.1, §4.3). So a variant sent for a subscription
// replaces every other held variant of the name that matches it too — the
// unconstrained variant replaced by env=test and env=prod ones, say — which
// the server no longer has. Names some plain (non-TP2) subscription also
// covers are left alone: what those were sent carries no constraints.
func supersede(t *upType, b *decoded) {
	present := presentVariants(b.puts)
	plain, tp2 := map[string]bool{}, map[string]bool{}
	for k, sub := range t.subs {
		if sub.Locator {
			tp2[k.Name] = true
		} else {
			plain[k.Name] = true
		}
	}
	gone := map[resource.Key]bool{}
	for _, k := range b.gone {
		gone[k] = true
	}
	// drop: the held variants of n this response did not send, and goes
	// says are replaced, are gone.
	drop := func(n string, goes func(ck string) bool) {
		for ck := range t.held[n] {
			key := resource.Key{Type: t.url, Name: n, Constraints: ck}
			if !present[n][ck] && !gone[key] && goes(ck) {
				gone[key] = true
				b.gone = append(b.gone, key)
			}
		}
	}
	for k, sub := range t.subs {
		if sub.Locator && !plain[k.Name] && present[k.Name] != nil && anyMatches(b.puts, k.Name, sub.Params) {
			drop(k.Name, func(ck string) bool { return keyMatches(ck, sub.Params) })
		}
	}
	// A name only plain subscriptions cover is sent the one variant the
	// server picks for this client (by its node): the one sent replaces
	// whatever else is held under the name. (It carries its constraints
	// when the client takes wrapped SotW resources, so it does not simply
	// overwrite the unconstrained copy.)
	for n := range plain {
		if !tp2[n] && present[n] != nil {
			drop(n, func(string) bool { return true })
		}
	}
}

// keyMatches reports whether the constraints with canonical key ck match
// params (false for a key that does not parse).
func keyMatches(ck string, params constraint.Params) bool {
	var cons constraint.Constraints
	if ck != "" {
		if err := cons.UnmarshalText([]byte(ck)); err != nil {
			return false
		}
	}
	return cons.Match(params)
}

// presentVariants indexes variants by name and constraint key.
func presentVariants(vs []*resource.Variant) map[string]map[string]bool {
	present := map[string]map[string]bool{}
	for _, v := range vs {
		if present[v.Name] == nil {
			present[v.Name] = map[string]bool{}
		}
		present[v.Name][v.Constraints.Key()] = true
	}
	return present
}

// anyMatches reports whether a variant of n among vs matches params.
func anyMatches(vs []*resource.Variant, n string, params constraint.Params) bool {
	for _, v := range vs {
		if v.Name == n && v.Constraints.Match(params) {
			return true
		}
	}
	return false
}

// apply records a decoded response as held and turns it into a db update.
// With fullState, held resources the response left out are deleted.
func (ch *channel) apply(t *upType, b *decoded, fullState bool) db.Update {
	var u db.Update
	if len(b.puts) > 0 {
		// A resource no subscription covers any more — sent before the
		// server saw the unsubscription — is not cached: nothing would evict
		// it, and a later watcher would be served it stale. A virtual host
		// is covered by the names it answers as an alias of, or, for an
		// update, by being held already.
		wants := t.wanted()
		answers := map[string]bool{}
		for alias, vh := range b.aliases {
			if wants(alias) {
				answers[vh] = true
			}
		}
		vhds := t.url == resource.VirtualHostURL
		kept := b.puts[:0]
		for _, v := range b.puts {
			if wants(v.Name) || vhds && (answers[v.Name] || t.held[v.Name] != nil) {
				kept = append(kept, v)
			}
		}
		clear(b.puts[len(kept):])
		b.puts = kept
	}
	present := presentVariants(b.puts)
	for _, h := range b.heartbeats {
		// A heartbeat keeps what it renews: in a full state it stands for
		// the resource, held as it was.
		if present[h.name] == nil {
			present[h.name] = map[string]bool{}
		}
		present[h.name][h.ckey] = true
	}
	for _, v := range b.puts {
		if t.held[v.Name] == nil {
			t.held[v.Name] = map[string]string{}
		}
		t.held[v.Name][v.Constraints.Key()] = v.Version
	}
	u.Puts = b.puts
	if fullState && len(b.errs) == 0 {
		// A full-state response is the whole truth about what the request
		// it answers named (docs/protocol.md §1.7): what it leaves out of that
		// is deleted, or does not exist. A name subscribed since may be
		// left out only because the server had not seen it yet.
		all, named := t.namedByAnswered()
		for n, cks := range t.held {
			if !all && !named[n] {
				continue
			}
			for ck := range cks {
				if !present[n][ck] {
					b.gone = append(b.gone, resource.Key{Type: t.url, Name: n, Constraints: ck})
				}
			}
		}
		seen := map[string]bool{}
		for k, sub := range t.subs {
			if k.Name == db.Wildcard || !(all || named[k.Name]) {
				continue
			}
			if present[k.Name] == nil && t.held[k.Name] == nil && !seen[k.Name] {
				seen[k.Name] = true
				b.removed = append(b.removed, k.Name)
			}
			// TP2: the name is there, but no variant for these parameters —
			// for them, it does not exist (TP2 "Best Practices").
			if present[k.Name] != nil && sub.Locator && !anyMatches(b.puts, k.Name, sub.Params) {
				b.noVariant = append(b.noVariant, db.Key{Type: t.url, Name: k.Name, ParamsKey: k.ParamsKey})
			}
		}
	}
	for _, k := range b.gone {
		if t.unhold(k) {
			// The last variant went: the resource is gone.
			b.emptied = append(b.emptied, k.Name)
		}
		u.Deletes = append(u.Deletes, k)
	}
	for _, n := range b.removed {
		for ck := range t.held[n] {
			u.Deletes = append(u.Deletes, resource.Key{Type: t.url, Name: n, Constraints: ck})
		}
		delete(t.held, n)
	}
	ch.ttls(t, b)
	u.Known = append(t.answered(b), b.noVariant...)
	b.gen = ch.gen
	for _, ns := range [][]string{b.removed, b.emptied, b.notFound} {
		b.answered = append(b.answered, ns...)
	}
	for _, v := range b.puts {
		b.answered = append(b.answered, v.Name)
	}
	for a := range b.aliases {
		b.answered = append(b.answered, a)
	}
	return u
}

// namedByAnswered tells which names the request the latest SotW response
// answers surely covered: all of them when the wildcard was in every
// request it may answer, else those whose every subscription was.
func (t *upType) namedByAnswered() (all bool, names map[string]bool) {
	names = map[string]bool{}
	not := map[string]bool{}
	for k := range t.subs {
		switch {
		case !t.sent.named(k):
			not[k.Name] = true
		case k.Name == db.Wildcard:
			all = true
		default:
			names[k.Name] = true
		}
	}
	for n := range not {
		delete(names, n)
	}
	return all, names
}

// answered lists the subscriptions a response answered — with a variant
// for their parameters, or by saying there is none — so that a relay tells
// its downstream clients only what its upstream has said (db.NewCache).
func (t *upType) answered(b *decoded) []db.Key {
	absent := map[string]bool{}
	for _, ns := range [][]string{b.removed, b.emptied, b.notFound} {
		for _, n := range ns {
			absent[n] = true
		}
	}
	byName := map[string][]*resource.Variant{}
	inGlob := map[string]bool{}
	for _, v := range b.puts {
		byName[v.Name] = append(byName[v.Name], v)
		if g, ok := db.InGlob(v.Name); ok {
			inGlob[g] = true
		}
	}
	goneBy := map[string][]string{}
	for _, k := range b.gone {
		goneBy[k.Name] = append(goneBy[k.Name], k.Constraints)
	}
	var out []db.Key
	for k, s := range t.subs {
		n := k.Name
		known := absent[n] || b.aliases[n] != ""
		switch {
		case known:
		case n == db.Wildcard:
			known = true // a response of the type answers the wildcard
		case inGlob[n]:
			known = true
		default:
			for _, v := range byName[n] {
				known = known || !s.Locator || v.Constraints.Match(s.Params)
			}
			for _, ck := range goneBy[n] {
				// The variant serving these parameters went, and nothing
				// replaced it in the same response (TP2: a replacement
				// comes in one response): there is none for them.
				if c, err := constraint.Parse(ck); err == nil && (!s.Locator || c.Match(s.Params)) {
					known = true
				}
			}
		}
		if known {
			out = append(out, db.Key{Type: t.url, Name: n, ParamsKey: k.ParamsKey})
		}
	}
	return out
}

// ttls keeps the TTL timers in step with a response: a variant with a TTL
// (re)starts its timer, one without stops it, a heartbeat of the version
// held renews it, a removal stops it.
func (ch *channel) ttls(t *upType, b *decoded) {
	for _, v := range b.puts {
		ch.setTTL(t, v.Name, v.Constraints.Key(), v.Version, v.TTL)
	}
	for _, h := range b.heartbeats {
		if t.held[h.name][h.ckey] == h.version {
			ch.setTTL(t, h.name, h.ckey, h.version, h.ttl)
			ch.c.o.Logger.Debug("xDS TTL renewed", "type", t.url, "name", h.name, "ttl", h.ttl)
		}
	}
	for _, k := range b.gone {
		ch.setTTL(t, k.Name, k.Constraints, "", 0)
	}
	for _, n := range b.removed {
		for k := range t.ttl {
			if k[0] == n {
				ch.setTTL(t, n, k[1], "", 0)
			}
		}
	}
}

// setTTL starts (ttl > 0) or stops a held variant's TTL timer.
func (ch *channel) setTTL(t *upType, n, ck, version string, ttl time.Duration) {
	k := [2]string{n, ck}
	if old := t.ttl[k]; old != nil {
		old.Stop()
		delete(t.ttl, k)
	}
	if ttl <= 0 {
		return
	}
	if t.ttl == nil {
		t.ttl = map[[2]string]*ttlTimer{}
	}
	// The timer's identity is known before it can fire (a timer variable
	// assigned after AfterFunc returns would race with a short TTL); it
	// fires on a goroutine of its own, and expires on the state goroutine.
	tm := &ttlTimer{}
	tm.Timer = time.AfterFunc(ttl, func() { ch.c.state.Schedule(func() { ch.expire(t.url, n, ck, version, tm) }) })
	t.ttl[k] = tm
}

// ttlTimer is a held variant's TTL timer.
type ttlTimer struct{ *time.Timer }

// expire drops a variant whose TTL ran out with no renewal: to the cache
// and its watchers, as if the server had removed it.
func (ch *channel) expire(typeURL, n, ck, version string, tm *ttlTimer) {
	t := ch.types[typeURL]
	if t == nil || t.ttl[[2]string{n, ck}] != tm || t.held[n][ck] != version {
		return // renewed, replaced or gone meanwhile
	}
	d := &decoded{gone: []resource.Key{{Type: typeURL, Name: n, Constraints: ck}}}
	up := ch.apply(t, d, false)
	if t.retained[n] {
		// Nothing subscribes to it: the cache drops it, and no status of it
		// is kept.
		d.emptied = nil
		if t.held[n] == nil {
			delete(t.retained, n)
		}
	}
	ch.c.applied(ch, typeURL, up, d)
	// (Once the cache has dropped it.)
	ch.c.o.Logger.Info("xDS resource expired: its TTL passed with no renewal", "type", typeURL, "name", n, "constraints", ck, "version", version)
}
