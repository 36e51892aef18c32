package inspect

import (
	"context"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/resource"
)

// Result is one resource as get and watch print it.
type Result struct {
	Time  string `json:"time,omitempty"`
	Event string `json:"event,omitempty"`
	admin.Resource
	Via    []string `json:"via,omitempty"`
	Status string   `json:"status,omitempty"` // does-not-exist, or (get) no-answer
}

// The statuses of a name that could not be had.
const (
	StatusDoesNotExist = "does-not-exist" // the server says so
	StatusNoAnswer     = "no-answer"      // get: the server said nothing of it within the timeout
)

// Render is an event as get and watch print it.
func Render(e client.Event, typ *resource.Type) Result {
	r := Result{Event: e.Kind.String(), Via: e.Via}
	if e.Variant != nil {
		r.Resource = admin.Render(e.Variant)
	} else {
		r.Resource = admin.Resource{Type: typ.Name}
	}
	r.Resource.Name = e.Name
	switch e.Kind {
	case client.DoesNotExist, client.Removed:
		r.Status = StatusDoesNotExist
	case client.Errored:
		r.Error = e.Err.Error()
	}
	return r
}

// NameError is a name the client refused to watch (a malformed name, or
// one carrying attributes only a client may compute): the operator's
// mistake, not the server's.
type NameError struct {
	Name string
	Err  error
}

func (e *NameError) Error() string { return e.Name + ": " + e.Err.Error() }

// Unwrap returns the client's error.
func (e *NameError) Unwrap() error { return e.Err }

// watchName watches a name given by the operator, with the computed
// attributes when there are any.
func watchName(ctx context.Context, c *client.Client, computed map[string]string, typeURL, n string, h client.Handler) (client.CancelFunc, error) {
	var (
		cancel client.CancelFunc
		err    error
	)
	if len(computed) > 0 {
		cancel, err = c.WatchComputed(ctx, typeURL, n, computed, h)
	} else {
		cancel, err = c.Watch(ctx, typeURL, n, h)
	}
	if err != nil {
		return nil, &NameError{Name: n, Err: err}
	}
	return cancel, nil
}
