package server

import (
	"context"

	"github.com/xdsd/xdsd/resource"
)

// Source is a program's own source of truth — a service registry,
// Kubernetes objects, a database — for a server to pull from (Follow).
type Source interface {
	// Resources returns every resource the source defines, as it is
	// now. An error keeps the last state served.
	Resources(ctx context.Context) ([]*resource.Variant, error)
}

// Follow keeps the server in step with src until ctx ends: it pulls src
// at once and on every receive from trigger (a time.Ticker's C, or a
// channel the program signals when its source changes), and applies what
// changed as one batch. A resource src returned before and no longer
// returns is deleted, with all its variants; what src did not define is
// never touched. A pull that fails, or a state that Apply rejects, is
// logged and changes nothing; the next trigger tries again. Follow
// returns nil when ctx ends, and trigger closing stops it the same way.
func (s *Server) Follow(ctx context.Context, src Source, trigger <-chan struct{}) error {
	type id struct{ typ, name string }
	var prev map[id]bool // what the last applied pull defined
	for {
		vs, err := src.Resources(ctx)
		if err == nil {
			cur := make(map[id]bool, len(vs))
			b := Batch{Puts: vs}
			for _, v := range vs {
				if v != nil && v.Type != nil {
					cur[id{v.Type.URL, v.Name}] = true
				}
			}
			for k := range prev {
				if !cur[k] {
					b.Deletes = append(b.Deletes, Delete{Type: k.typ, Name: k.name, All: true})
				}
			}
			if _, err = s.Apply(ctx, b); err == nil {
				prev = cur
			}
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error("source not applied; serving the last state", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-trigger:
			if !ok {
				return nil
			}
		}
	}
}
