package store

import (
	"bytes"
	"sort"

	"github.com/xdsd/xdsd/resource"
)

// MemState is a committed state held in memory with the log of its recent
// revisions: the whole of the in-memory store, and an etcd replica's copy
// of the shared state. It answers the reading half of Store (Changes,
// Revisions, StateAt, Meta) the same way for both. It is not safe for
// concurrent use: its owner holds a lock around every call.
type MemState struct {
	rev       int64
	data      map[[2]string]map[string]*resource.Variant // (type, name) → constraint key → variant
	meta      map[string][]byte
	log       []LogEntry
	compacted int64 // the log holds every revision after this one
	history   int
}

// LogEntry is one revision in a MemState's log: the keys it changed, its
// record, and the variants it replaced or deleted (for StateAt).
type LogEntry struct {
	Rev  int64
	Keys []resource.Key
	Rec  Revision
	Undo map[resource.Key]*resource.Variant
}

// NewMemState returns an empty state at revision 0 keeping the log of the
// last history revisions (at least 1).
func NewMemState(history int) *MemState {
	return &MemState{data: map[[2]string]map[string]*resource.Variant{}, meta: map[string][]byte{}, history: max(history, 1)}
}

// Rev is the revision of the state.
func (m *MemState) Rev() int64 { return m.rev }

// Variants implements Reader: the variants of one resource, in
// constraint-key order.
func (m *MemState) Variants(typeURL, name string) ([]*resource.Variant, error) {
	vs := m.data[[2]string{typeURL, name}]
	out := make([]*resource.Variant, 0, len(vs))
	for _, v := range vs {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Constraints.Key() < out[j].Constraints.Key() })
	return out, nil
}

// Put stores v, replacing the variant with its key.
func (m *MemState) Put(v *resource.Variant) {
	k := v.Key()
	g := [2]string{k.Type, k.Name}
	if m.data[g] == nil {
		m.data[g] = map[string]*resource.Variant{}
	}
	m.data[g][k.Constraints] = v
}

// Delete removes the variant with key k.
func (m *MemState) Delete(k resource.Key) {
	g := [2]string{k.Type, k.Name}
	delete(m.data[g], k.Constraints)
	if len(m.data[g]) == 0 {
		delete(m.data, g)
	}
}

// SetMeta sets a metadata value; nil deletes it. The state keeps v.
func (m *MemState) SetMeta(key string, v []byte) {
	if v == nil {
		delete(m.meta, key)
	} else {
		m.meta[key] = v
	}
}

// Meta returns a copy of a metadata value (nil when unset).
func (m *MemState) Meta(key string) []byte { return bytes.Clone(m.meta[key]) }

// MetaEqual says whether the metadata value of key is v (nil: unset).
func (m *MemState) MetaEqual(key string, v []byte) bool {
	cur, ok := m.meta[key]
	return ok == (v != nil) && bytes.Equal(cur, v)
}

// Record makes e the state's revision and logs it, dropping the oldest
// entries beyond the history kept.
func (m *MemState) Record(e LogEntry) {
	m.rev = e.Rev
	m.log = append(m.log, e)
	if len(m.log) > m.history {
		drop := len(m.log) - m.history
		m.compacted = m.log[drop-1].Rev
		m.log = append([]LogEntry(nil), m.log[drop:]...)
	}
}

// Commit applies a plan as revision rev: its deletes and puts, and its
// record with audit.
func (m *MemState) Commit(p Plan, rec Revision) {
	e := LogEntry{Rev: rec.Rev, Rec: rec, Undo: p.Prev}
	for _, k := range p.Deletes {
		m.Delete(k)
		e.Keys = append(e.Keys, k)
	}
	for _, v := range p.Puts {
		m.Put(v)
		e.Keys = append(e.Keys, v.Key())
	}
	m.Record(e)
}

// Replace swaps in a whole state read elsewhere (an etcd replica's
// reload): its content, its log (oldest first, without gaps, ending at
// rev) and the revision the log starts after. It says whether any variant
// differs from the state replaced, or the revision moved.
func (m *MemState) Replace(rev int64, data *MemState, log []LogEntry, compacted int64) bool {
	changed := m.rev != rev || m.differs(data)
	m.rev, m.data, m.meta, m.log, m.compacted = rev, data.data, data.meta, log, compacted
	return changed
}

// differs says whether o holds other variants than m.
func (m *MemState) differs(o *MemState) bool {
	if len(m.data) != len(o.data) {
		return true
	}
	for g, vs := range m.data {
		ovs := o.data[g]
		if len(vs) != len(ovs) {
			return true
		}
		for c, v := range vs {
			if ov := ovs[c]; ov == nil || ov.Version != v.Version || !ov.SameContent(v) {
				return true
			}
		}
	}
	return false
}

// all returns every variant (filtered by f) in no particular order.
func (m *MemState) all(f Filter) []*resource.Variant {
	var out []*resource.Variant
	for g, vs := range m.data {
		if f.Type != "" && g[0] != f.Type || f.Name != "" && g[1] != f.Name {
			continue
		}
		for _, v := range vs {
			out = append(out, v)
		}
	}
	return out
}

// Revisions answers Store.Revisions from the log.
func (m *MemState) Revisions(q HistoryQuery) RevisionList {
	out := RevisionList{Rev: m.rev, Oldest: m.compacted}
	for i := len(m.log) - 1; i >= 0 && !q.Full(len(out.Revisions)); i-- {
		if !q.Wants(m.log[i].Rev, len(out.Revisions)) {
			continue
		}
		if r, ok := q.Filter.Select(m.log[i].Rec); ok {
			out.Revisions = append(out.Revisions, r)
		}
	}
	return out
}

// StateAt answers Store.StateAt: the state rewound through the log.
func (m *MemState) StateAt(rev int64, f Filter) ([]*resource.Variant, error) {
	if err := CheckStateAt(rev, m.rev, m.compacted); err != nil {
		return nil, err
	}
	w := NewRewinder(m.all(f), f)
	for i := len(m.log) - 1; i >= 0 && m.log[i].Rev > rev; i-- {
		undo := m.log[i].Undo
		if err := w.Undo(m.log[i].Rec, func(k resource.Key) (*resource.Variant, error) { return undo[k], nil }); err != nil {
			return nil, err
		}
	}
	return w.State(), nil
}

// Changes answers Store.Changes: the coalesced changes after since from
// the log, or the whole state as a Reset when the log does not reach back
// to since (or since is ahead of the state).
func (m *MemState) Changes(since int64) (ChangeSet, error) {
	if since < 0 || since < m.compacted || since > m.rev {
		cs := ChangeSet{Rev: m.rev, Reset: true, Puts: m.all(Filter{})}
		sort.Slice(cs.Puts, func(i, j int) bool { return CompareKeys(cs.Puts[i].Key(), cs.Puts[j].Key()) < 0 })
		return cs, nil
	}
	i := sort.Search(len(m.log), func(i int) bool { return m.log[i].Rev > since })
	var keys []resource.Key
	for _, e := range m.log[i:] {
		keys = append(keys, e.Keys...)
	}
	return Coalesce(m.rev, keys, func(k resource.Key) (*resource.Variant, error) {
		return m.data[[2]string{k.Type, k.Name}][k.Constraints], nil
	})
}
