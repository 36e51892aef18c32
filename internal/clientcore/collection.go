package clientcore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// WatchCollection is client.Client's WatchCollection, which documents it.
func (c *Client) WatchCollection(ctx context.Context, typeURL, collection string, h func([]clientdata.CollectionMember), onErr func(error)) (cancel CancelFunc, err error) {
	coll := resource.ForURL(typeURL)
	if coll.Element == nil {
		return nil, fmt.Errorf("%s is not a list collection type", coll.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lc := &listCollection{c: c, elem: coll.Element, h: h, onErr: onErr, members: map[string]CancelFunc{}, values: map[string]*resource.Variant{}}
	cancelColl, err := c.Watch(context.Background(), typeURL, collection, lc.onCollection)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	var done <-chan struct{}
	cancelAll := func() <-chan struct{} {
		once.Do(func() {
			lc.cancelled.Store(true)
			cancelColl()
			// The members are the handler goroutine's: cancelled there,
			// after which their cancels are done too.
			ch := make(chan struct{})
			if c.handlers.Schedule(func() {
				for _, cf := range lc.members {
					cf()
				}
				lc.members = nil
				c.handlers.Schedule(func() { close(ch) })
			}) {
				done = ch
			} else {
				done = c.handlers.Done()
			}
		})
		return done
	}
	stop := context.AfterFunc(ctx, func() { cancelAll() })
	return func() <-chan struct{} {
		stop()
		return cancelAll()
	}, nil
}

// listCollection is one WatchCollection: its handlers, and what it holds,
// are the handler goroutine's.
type listCollection struct {
	c         *Client
	elem      *resource.Type
	h         func([]clientdata.CollectionMember)
	onErr     func(error)
	cancelled atomic.Bool
	members   map[string]CancelFunc // locator URL (with its directives) → cancel
	coll      *resource.Variant
	values    map[string]*resource.Variant
}

// onCollection follows the collection's locator entries.
func (lc *listCollection) onCollection(e clientdata.Event) {
	switch e.Kind {
	case clientdata.Errored:
		lc.reportErr(e.Err)
		return
	case clientdata.Removed, clientdata.DoesNotExist:
		lc.coll = nil
	case clientdata.Updated:
		lc.coll = e.Variant
	}
	var errs []error
	want := map[string]bool{}
	if lc.coll != nil {
		entries, err := resource.CollectionEntries(lc.coll.Body())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", lc.coll.Name, err))
		}
		for _, en := range entries {
			if l := en.GetLocator(); l != nil {
				if n, err := name.FromLocator(l); err == nil {
					// With its directives: an #alt= is the member's.
					want[n.String()] = true
				}
			}
		}
	}
	if lc.isCancelled() {
		return
	}
	for n, cf := range lc.members {
		if !want[n] {
			cf()
			delete(lc.members, n)
			delete(lc.values, n)
		}
	}
	for n := range want {
		if _, ok := lc.members[n]; ok {
			continue
		}
		cf, err := lc.c.watch(context.Background(), lc.elem.URL, n, func(e clientdata.Event) {
			switch e.Kind {
			case clientdata.Updated:
				lc.values[n] = e.Variant
			case clientdata.Removed, clientdata.DoesNotExist:
				delete(lc.values, n)
			case clientdata.Errored:
				lc.reportErr(e.Err)
			}
			lc.report()
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", n, err))
			continue
		}
		lc.members[n] = cf
	}
	for _, err := range errs {
		lc.reportErr(err)
	}
	lc.report()
}

// reportErr passes an error to onErr, if set, unless the collection has
// been cancelled (an earlier onErr may have cancelled it).
func (lc *listCollection) reportErr(err error) {
	if lc.onErr == nil || lc.isCancelled() {
		return
	}
	lc.onErr(err)
}

func (lc *listCollection) isCancelled() bool {
	return lc.cancelled.Load() || lc.c.closing.Load() // (a callback may have closed the client)
}

func (lc *listCollection) report() {
	if lc.isCancelled() {
		return
	}
	var out []clientdata.CollectionMember
	if lc.coll != nil {
		entries, _ := resource.CollectionEntries(lc.coll.Body())
		for _, en := range entries {
			if ie := en.GetInlineEntry(); ie != nil {
				a := ie.GetResource()
				v := resource.NewVariant(lc.elem, ie.GetName(), constraint.Constraints{}, ie.GetVersion(), a.GetTypeUrl(), a.GetValue())
				out = append(out, clientdata.CollectionMember{Name: ie.GetName(), Variant: v, Inline: true})
				continue
			}
			if l := en.GetLocator(); l != nil {
				if n, err := name.FromLocator(l); err == nil {
					if v := lc.values[n.String()]; v != nil {
						out = append(out, clientdata.CollectionMember{Name: n.URN().String(), Variant: v})
					}
				}
			}
		}
	}
	lc.h(out)
}
