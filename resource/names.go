package resource

import (
	"fmt"
	"regexp"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/name"
)

// CanonicalName returns the canonical form of a resource name: xdstp:// URNs
// normalized (parameter order, escaping), legacy names unchanged.
func CanonicalName(s string) (string, error) {
	n, err := name.ParseURN(s)
	if err != nil {
		return "", err
	}
	return n.String(), nil
}

// ComputedPrefix begins the context parameters a client computes and adds
// to an xdstp:// name (TP1 "Context parameters": xds.resource.vip), as
// opposed to those of the name it was configured with.
const ComputedPrefix = "xds.resource."

// CheckConfiguredName refuses a name a client was configured with (not
// computed) that carries xds.* context parameters, which TP1 reserves for
// what the client itself adds.
func CheckConfiguredName(s string) error {
	n, err := name.Parse(s)
	if err != nil || !n.IsXDSTP() {
		return nil
	}
	for _, p := range n.Params {
		if len(p.Key) >= 4 && strings.EqualFold(p.Key[:4], "xds.") {
			return fmt.Errorf("%s: context parameter %q is in the xds. namespace, which TP1 reserves for attributes a client computes (give them as computed attributes, not in the name)", s, p.Key)
		}
	}
	return nil
}

// CheckName validates a name for a resource of type t and returns its
// canonical form. An xdstp:// name must be a URN whose type segment is the
// resource type and whose context parameters avoid the reserved xds.
// namespace but for computed xds.resource.* attributes (TP1); a VirtualHost's legacy name must be "<route config>/<name>"
// so that on-demand VHDS can find it.
func CheckName(t *Type, s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("name is empty")
	}
	n, err := name.ParseURN(s)
	if err != nil {
		return "", err
	}
	if n.IsXDSTP() {
		if n.Type != t.Name {
			return "", fmt.Errorf("xdstp name %q has resource type %s, but the resource is a %s", s, n.Type, t.Name)
		}
		for _, p := range n.Params {
			// TP1 reserves the xds. namespace; xds.resource.* are the
			// attributes a client computes and adds to a name (an
			// on-demand listener by VIP: xds.resource.vip), so a server
			// authors resources under them. Case-insensitive:
			// "XDS.node.id" reads as reserved to every operator.
			if len(p.Key) >= 4 && strings.EqualFold(p.Key[:4], "xds.") && !strings.HasPrefix(p.Key, ComputedPrefix) {
				return "", fmt.Errorf("xdstp name %q: context parameter %q is in the reserved xds. namespace (only computed %s* attributes may be authored)", s, p.Key, ComputedPrefix)
			}
		}
	} else if t.URL == VirtualHostURL && !strings.Contains(s, "/") {
		return "", fmt.Errorf("virtual host name %q must be <route configuration name>/<virtual host name> (on-demand VHDS finds virtual hosts under their route configuration)", s)
	}
	return n.String(), nil
}

func checkRedirect(m proto.Message, t *Type) error {
	l, ok := m.(*xdscorev3.ResourceLocator)
	if !ok {
		return nil
	}
	n, err := name.FromLocator(l)
	if err != nil {
		return fmt.Errorf("redirect: %v", err)
	}
	if n.Glob {
		return fmt.Errorf("redirect to %s: a redirect must point at a resource, not a glob collection", n)
	}
	if n.Type != t.Name {
		return fmt.Errorf("redirect to %s: target is a %s, but the redirect is served as a %s", n, n.Type, t.Name)
	}
	return nil
}

// entryNameRE is TP1's charset for inline entry names, widened to the
// InlineEntry proto's (which adds ~ and :).
var entryNameRE = regexp.MustCompile(`^[0-9a-zA-Z_\-.~:/]+$`)

// decodeCollection decodes a TP1 list collection (<T>Collection), whose
// members are res. Its entries are always treated as repeated field 1:
// ClusterCollection and LbEndpointCollection declare the field singular,
// which cannot hold a list (docs/protocol.md §6.4), so we encode the list
// ourselves.
func decodeCollection(t *docText, resPath string, typ *Type, res []member, errs ErrorList) (proto.Message, []byte, ErrorList) {
	js := t.js
	var list *member
	for i, m := range res {
		switch m.key {
		case "@type":
		case "entries", "resources":
			list = &res[i]
		default:
			return nil, nil, append(errs, t.errAt(m.keyOff, joinPath(resPath, m.key), "unknown field (a list collection has only entries)"))
		}
	}
	var items []int
	if list != nil && string(js[list.valOff:list.valEnd]) != "null" {
		if js[list.valOff] != '[' {
			return nil, nil, append(errs, t.errAt(list.valOff, joinPath(resPath, "entries"), "must be a list"))
		}
		items = elements(js, list.valOff)
	}
	var body []byte
	names := map[string]bool{}
	for i, it := range items {
		p := fmt.Sprintf("%s[%d]", joinPath(resPath, "entries"), i)
		if js[it] != '{' {
			errs = append(errs, t.errAt(it, p, "must be an object with locator or inline_entry"))
			continue
		}
		e := &xdscorev3.CollectionEntry{}
		if perr := t.unmarshal(js[it:skipValue(js, it)], it, e); perr != nil {
			errs = append(errs, perr)
			continue
		}
		enc, err := Marshal(e)
		if err != nil {
			errs = append(errs, t.errAt(it, p, "cannot encode: %v", err))
			continue
		}
		for _, fe := range validateAuthored(e, enc, 2, MaxNesting) {
			errs = append(errs, t.errPath(joinPath(p, fe.Path), "%s", fe.Msg))
		}
		switch x := e.ResourceSpecifier.(type) {
		case *xdscorev3.CollectionEntry_Locator:
			n, err := name.FromLocator(x.Locator)
			switch {
			case err != nil:
				errs = append(errs, t.errPath(joinPath(p, "locator"), "%v", err))
			case n.Type != typ.Element.Name:
				errs = append(errs, t.errPath(joinPath(p, "locator"), "%s is a %s, but a %s holds %s resources", n, n.Type, typ.Name, typ.Element.Name))
			}
		case *xdscorev3.CollectionEntry_InlineEntry_:
			ie := x.InlineEntry
			if ie.GetName() != "" {
				if !entryNameRE.MatchString(ie.Name) {
					errs = append(errs, t.errPath(joinPath(p, "inline_entry.name"), "%q is not a valid entry name ([a-zA-Z0-9_-./~:]+)", ie.Name))
				} else if names[ie.Name] {
					errs = append(errs, t.errPath(joinPath(p, "inline_entry.name"), "entry name %q repeated: names must be unique in a collection", ie.Name))
				}
				names[ie.Name] = true
			}
			if ie.GetResource().GetTypeUrl() != typ.Element.URL {
				errs = append(errs, t.errPath(joinPath(p, "inline_entry.resource"), "holds a %s, but a %s holds %s resources", strings.TrimPrefix(ie.GetResource().GetTypeUrl(), TypePrefix), typ.Name, typ.Element.Name))
			}
		}
		b, err := Marshal(e)
		if err != nil {
			errs = append(errs, t.errAt(it, p, "%v", err))
			continue
		}
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, b)
	}
	if body == nil {
		body = []byte{}
	}
	msg := typ.New()
	// For display only: a declared-singular entries field keeps the last.
	_ = proto.Unmarshal(body, msg)
	return msg, body, errs
}

// CollectionEntries decodes the entries of a list collection payload, field 1
// read as repeated whatever the message declares (docs/protocol.md §6.4).
func CollectionEntries(body []byte) ([]*xdscorev3.CollectionEntry, error) {
	var out []*xdscorev3.CollectionEntry
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		body = body[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, body)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			body = body[n:]
			continue
		}
		b, n := protowire.ConsumeBytes(body)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		body = body[n:]
		e := &xdscorev3.CollectionEntry{}
		if err := proto.Unmarshal(b, e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
