package clientcheck

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/resource"
)

// Index is what the checks across resources need of the variants a
// store holds, kept between applies and changed with the store (Put,
// Delete): a server checking a batch against a million stored variants
// then works from the batch and what it touches (Checker.On) instead of
// adding every stored variant to each apply's checker (AddStored). It is
// not safe for concurrent use; nothing may change it while a checker
// using it runs.
type Index struct {
	set refs.Set
	// listens holds, by address, what each stored listener binds (for
	// Envoy's duplicate-address check), and byEntry each listener's.
	listens map[string][]listening
	byEntry map[*refs.Entry][]listening
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{} }

// Len is the number of variants the index holds.
func (x *Index) Len() int { return x.set.Len() }

// find returns the index's variant of a key, or nil.
func (x *Index) find(key resource.Key) *refs.Entry {
	for _, e := range x.set.Variants(key.Type, key.Name) {
		if e.Constraints.Key() == key.Constraints {
			return e
		}
	}
	return nil
}

// IndexMessage decodes what Put needs of a stored variant's payload: all
// of a listener (the addresses it binds), else only the fields that can
// lead to a reference (refs.Prune). With a million stored clusters and
// endpoints, decoding each whole took most of the index's build.
func IndexMessage(v *resource.Variant) (proto.Message, error) {
	if v.Type.URL == resource.ListenerURL {
		return v.Message()
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(v.PayloadURL)
	if err != nil {
		return v.Message() // its error
	}
	b, some, err := refs.Prune(mt.Descriptor(), v.Body())
	if err != nil {
		return v.Message() // its error
	}
	m := mt.New().Interface()
	if !some {
		return m, nil // nothing in it leads to a reference
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return v.Message()
	}
	return m, nil
}

// Put adds or replaces a stored variant, with its decoded payload (all
// of it, or IndexMessage's).
func (x *Index) Put(v *resource.Variant, m proto.Message) {
	x.Delete(v.Key())
	s := Summarize(v, m)
	x.set.Add(s.entry)
	if len(s.listens) == 0 {
		return
	}
	if x.listens == nil {
		x.listens = map[string][]listening{}
		x.byEntry = map[*refs.Entry][]listening{}
	}
	x.byEntry[s.entry] = s.listens
	for _, l := range s.listens {
		x.listens[l.addr] = append(x.listens[l.addr], l)
	}
}

// Delete removes the stored variant of a key, if the index holds it.
func (x *Index) Delete(key resource.Key) {
	e := x.find(key)
	if e == nil {
		return
	}
	x.set.Remove(e)
	for _, l := range x.byEntry[e] {
		ls := slices.DeleteFunc(x.listens[l.addr], func(o listening) bool { return o.e == e })
		if len(ls) == 0 {
			delete(x.listens, l.addr)
		} else {
			x.listens[l.addr] = ls
		}
	}
	delete(x.byEntry, e)
}

// compareEntries orders stored variants as store.CompareKeys orders their
// keys: type URL, name, constraints.
func compareEntries(a, b *refs.Entry) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Constraints.Key(), b.Constraints.Key()))
}

// AddTo adds every variant the index holds to k (AddStored), in the
// order of their keys, and, when before is not nil, to before too: what
// clients get before the batch (a dry run's plan, which needs the whole
// of both).
func (x *Index) AddTo(k *Checker, before *refs.Set) {
	es := slices.Clone(x.set.Entries())
	slices.SortFunc(es, compareEntries)
	for _, e := range es {
		k.AddStored(&Stored{entry: e, listens: x.byEntry[e]})
		if before != nil {
			before.Add(e)
		}
	}
}

// On makes k check its batch on top of what x holds, as if every variant
// of x had been added (AddStored), and work only near the batch: the
// stored variants that reference its resources, or lead to one that
// does, and the listeners that bind its listeners' addresses. Findings
// gives the same findings either way. x must not change until k's
// Findings has returned.
func (k *Checker) On(x *Index) { k.base = x }

// listensAt lists what the stored listeners the batch leaves bind at the
// addresses the batch's listeners bind, in the order AddStored would
// have added them.
func (x *Index) listensAt(k *Checker) []listening {
	var out []listening
	seen := map[string]bool{}
	for _, l := range k.listens {
		if seen[l.addr] {
			continue
		}
		seen[l.addr] = true
		for _, o := range x.listens[l.addr] {
			if !k.inBatch(o.e.Type, o.e.Name) {
				out = append(out, o)
			}
		}
	}
	// By variant, as AddStored adds them; a listener's own in its order.
	slices.SortStableFunc(out, func(a, b listening) int { return compareEntries(a.e, b.e) })
	return out
}
