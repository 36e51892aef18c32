package protojsonerr

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsd/xdsd/internal/suggest"
)

// The hints below turn "what is wrong" into "what to write instead": the
// error is found from structure (descriptors), and so is its hint.

// wellKnownHint says how a well-known type is written, for a value that
// is not.
func wellKnownHint(md protoreflect.MessageDescriptor) string {
	switch md.FullName() {
	case "google.protobuf.Duration":
		return `: a duration is a string of seconds ending in "s", e.g. "5s" or "0.25s"`
	case "google.protobuf.Timestamp":
		return `: a timestamp is an RFC 3339 string, e.g. "2026-01-02T15:04:05Z"`
	case "google.protobuf.FieldMask":
		return `: a field mask is one string of comma-separated field paths, e.g. "name,type"`
	case "google.protobuf.BoolValue":
		return ": write true or false"
	case "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return ": write a string"
	case "google.protobuf.Struct":
		return ": write an object"
	case "google.protobuf.ListValue":
		return ": write a list"
	}
	if strings.HasPrefix(string(md.Name()), "UInt") || strings.HasPrefix(string(md.Name()), "Int") ||
		md.Name() == "DoubleValue" || md.Name() == "FloatValue" {
		return ": write a number"
	}
	return ""
}

// enumHint lists an enum's values, with the nearest to what was written.
func enumHint(ed protoreflect.EnumDescriptor, written string) string {
	var names []string
	for i := range ed.Values().Len() {
		names = append(names, string(ed.Values().Get(i).Name()))
	}
	hint := ""
	if n := nearest(strings.ToUpper(strings.Trim(written, `"`)), names); n != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", n)
	}
	const most = 16
	list := names
	more := ""
	if len(list) > most {
		more = fmt.Sprintf(", … (%d in all)", len(names))
		list = list[:most]
	}
	return fmt.Sprintf("%s; %s takes %s%s", hint, ed.Name(), strings.Join(list, ", "), more)
}

// unknownFieldHint names the field that was probably meant by key in a
// message md: the nearest of its own fields, or, when key is the name of
// a field one or two levels down, the path to it (a field written at the
// wrong level).
func unknownFieldHint(md protoreflect.MessageDescriptor, key string) string {
	jsonStyle := !strings.Contains(key, "_") && strings.ToLower(key) != key
	name := func(fd protoreflect.FieldDescriptor) string {
		if jsonStyle {
			return fd.JSONName()
		}
		return string(fd.Name())
	}
	fields := md.Fields()
	var names []string
	for i := range fields.Len() {
		names = append(names, name(fields.Get(i)))
	}
	if n := nearest(key, names); n != "" {
		return fmt.Sprintf(" (did you mean %s?)", n)
	}
	// One or two levels down, skipping the well-known types.
	var paths []string
	for _, fd := range subMessages(md) {
		for _, f2 := range fieldList(fd.Message()) {
			if name(f2) == key {
				paths = append(paths, name(fd)+"."+key)
			}
		}
	}
	if len(paths) == 0 {
		for _, fd := range subMessages(md) {
			for _, f2 := range subMessages(fd.Message()) {
				if f2.Message() == md {
					continue
				}
				for _, f3 := range fieldList(f2.Message()) {
					if name(f3) == key {
						paths = append(paths, name(fd)+"."+name(f2)+"."+key)
					}
				}
			}
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	switch {
	case len(paths) == 0:
		return fmt.Sprintf(" (%s has no such field)", md.Name())
	case len(paths) > 3:
		paths = append(paths[:3], "…")
	}
	return fmt.Sprintf(" (%s is a field of a message inside %s: did you mean %s?)", key, md.Name(), strings.Join(paths, " or "))
}

// fieldList is a message's fields.
func fieldList(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	out := make([]protoreflect.FieldDescriptor, md.Fields().Len())
	for i := range out {
		out[i] = md.Fields().Get(i)
	}
	return out
}

// subMessages is the fields of md that hold a message a user writes
// fields into: not a well-known type, not a map.
func subMessages(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	var out []protoreflect.FieldDescriptor
	for _, fd := range fieldList(md) {
		if sub := fd.Message(); sub != nil && !wellKnown(sub) && !fd.IsMap() {
			out = append(out, fd)
		}
	}
	return out
}

// nearest is the candidate closest to word, if one is close enough to be
// a likely typo (a third of the word's length, at most 3 edits).
func nearest(word string, candidates []string) string {
	limit := min(3, max(1, len(word)/3)) + 1
	best, bestD := "", limit
	for _, c := range candidates {
		if d := suggest.Distance(strings.ToLower(word), strings.ToLower(c), limit); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
