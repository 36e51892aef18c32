package clientdata

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// EventKind says what happened to a watched resource.
type EventKind int

// The kinds of events.
const (
	// Updated: the resource arrived or changed.
	Updated EventKind = iota + 1
	// Removed: the server deleted a resource the watcher had.
	Removed
	// DoesNotExist: the server says the resource does not exist, or it did
	// not come within Options.DoesNotExistTimeout.
	DoesNotExist
	// Errored: the resource was rejected (and NACKed), or cannot be fetched;
	// Variant holds the last good value, if any.
	Errored
)

// String names the kind: "updated", "removed", "does-not-exist" or "error".
func (k EventKind) String() string {
	switch k {
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	case DoesNotExist:
		return "does-not-exist"
	case Errored:
		return "error"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is what a watcher is told.
type Event struct {
	Kind EventKind
	// Type is the type URL watched.
	Type string
	// Name is the name watched; for a glob or wildcard watch, the member.
	Name string
	// Variant is the resource (Updated), or the last good one (Errored).
	Variant *resource.Variant
	// Err says why (Errored).
	Err error
	// Via lists the names followed to reach Variant: TP1 redirects, or the
	// #alt= URL while the primary authority is unreachable.
	Via []string
}

// Message decodes the event's resource.
func (e Event) Message() (proto.Message, error) {
	if e.Variant == nil {
		return nil, errors.New("no resource")
	}
	return e.Variant.Message()
}

// CollectionMember is one member of a list collection: an inline entry, or
// a resource a locator entry points at.
type CollectionMember struct {
	Name    string // the entry's name (inline) or the locator's URN
	Variant *resource.Variant
	Inline  bool
}
