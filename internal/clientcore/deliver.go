package clientcore

import (
	"errors"
	"sort"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// Delivery runs on the handler goroutine: a watcher woken (by the db, or
// by a status the state goroutine published) reads the cache and its
// statuses as they are now, and tells its handler what changed since it
// last did.

func (w *watcher) deliver() {
	if w.cancelled.Load() {
		return
	}
	if w.kind == db.Glob || w.kind == db.AllOfType {
		w.deliverMembers()
		return
	}
	target := w.name
	var via []string
	if w.alt != "" {
		target, via = w.chooseAlt()
	}
	chain := map[string]bool{}
	v, cur, via, ferr := w.resolve(target, w.read(target), via, chain)
	w.letGo(chain)
	if ferr != nil {
		if ferr.Error() != w.lastErr {
			w.lastErr = ferr.Error()
			w.emit(clientdata.Event{Kind: clientdata.Errored, Err: ferr, Variant: w.last, Via: via})
		}
		return
	}
	if v != nil && w.entry != "" {
		var err error
		if v, err = inlineEntry(v, w.entry); err != nil {
			// Once: the collection's other entries may change meanwhile.
			if err.Error() != w.lastErr {
				w.lastErr = err.Error()
				w.emit(clientdata.Event{Kind: clientdata.Errored, Err: err, Variant: w.last, Via: via})
			}
			return
		}
	}
	st := w.c.view(w.typ, cur)
	switch {
	case v != nil:
		if !sameVariant(v, w.last) {
			w.last, w.toldAbsent = v, false
			w.emit(clientdata.Event{Kind: clientdata.Updated, Variant: v, Via: via})
		}
	case st.absent:
		if w.last != nil {
			w.last = nil
			w.toldAbsent = true
			w.emit(clientdata.Event{Kind: clientdata.Removed, Via: via})
		} else if !w.toldAbsent {
			w.toldAbsent = true
			w.emit(clientdata.Event{Kind: clientdata.DoesNotExist, Via: via})
		}
	}
	if st.err != w.lastErr {
		w.lastErr = st.err
		if st.err != "" {
			w.emit(clientdata.Event{Kind: clientdata.Errored, Err: errors.New(st.err), Variant: w.last, Via: via})
		}
	}
}

// deliverMembers tells a glob or wildcard watcher of members as they come
// and go; an empty glob is told DoesNotExist.
func (w *watcher) deliverMembers() {
	cur := map[string]*resource.Variant{}
	var order []string
	w.c.db.Read(func(r *db.Reader) {
		var names []string
		if w.kind == db.Glob {
			names = r.GlobNames(w.typ, w.name)
		} else {
			names = r.Names(w.typ)
		}
		for _, n := range names {
			if v := w.pick(r.Variants(w.typ, n)); v != nil {
				cur[n] = v
				order = append(order, n)
			}
		}
	})
	if w.members == nil {
		w.members = map[string]*resource.Variant{}
		w.memberErrs = map[string]string{}
	}
	// TP1: members of a glob may be redirected individually.
	chain := map[string]bool{}
	via := map[string][]string{}
	for _, n := range order {
		if !cur[n].IsRedirect() {
			continue
		}
		v, target, vs, err := w.resolve(n, cur[n], nil, chain)
		switch {
		case v != nil:
			cur[n], via[n] = v, vs
		case err == nil && !w.c.view(w.typ, target).absent && w.members[n] != nil:
			// The target is not here yet: hold on to what the member was.
			cur[n] = w.members[n]
		default:
			delete(cur, n)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != w.memberErrs[n] {
			if msg == "" {
				delete(w.memberErrs, n)
			} else {
				w.memberErrs[n] = msg
				w.emit(clientdata.Event{Kind: clientdata.Errored, Name: n, Err: err, Variant: w.members[n], Via: vs})
			}
		}
	}
	w.letGo(chain)
	for n := range w.memberErrs {
		if _, ok := cur[n]; !ok && !chain[n] {
			delete(w.memberErrs, n)
		}
	}
	for _, n := range order {
		if v := cur[n]; v != nil && v != w.members[n] {
			w.members[n] = v
			w.emit(clientdata.Event{Kind: clientdata.Updated, Name: n, Variant: v, Via: via[n]})
		}
	}
	var gone []string
	for n := range w.members {
		if cur[n] == nil {
			gone = append(gone, n)
		}
	}
	sort.Strings(gone)
	for _, n := range gone {
		delete(w.members, n)
		w.emit(clientdata.Event{Kind: clientdata.Removed, Name: n})
	}
	st := w.c.view(w.typ, w.name)
	if len(cur) == 0 && st.absent && !w.toldAbsent {
		w.toldAbsent = true
		w.emit(clientdata.Event{Kind: clientdata.DoesNotExist})
	}
	if len(cur) > 0 {
		w.toldAbsent = false
	}
	if st.err != w.lastErr {
		w.lastErr = st.err
		if st.err != "" {
			w.emit(clientdata.Event{Kind: clientdata.Errored, Err: errors.New(st.err)})
		}
	}
}
