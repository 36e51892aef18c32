package meshgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// blockYAML writes a JSON object as block-style YAML, its keys in their
// order, two spaces an indent, sequences of mappings as "- key: value"
// items; empty mappings and lists stay "{}" and "[]". Text that YAML
// would read as anything else (or that starts with a character YAML
// reserves) is double-quoted.
func blockYAML(js string) (string, error) {
	// Token by token, to keep the order of keys.
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	writeBlock(&b, n, 0, false)
	return b.String(), nil
}

// node is a JSON value with its object keys in order.
type node struct {
	obj    []kv
	arr    []*node
	scalar string // as YAML writes it
	kind   byte   // '{', '[' or 's'
}

type kv struct {
	k string
	v *node
}

func readNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &node{kind: byte(t)}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.obj = append(n.obj, kv{k.(string), v})
				continue
			}
			v, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.arr = append(n.arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return n, nil
	case string:
		return &node{kind: 's', scalar: text(t)}, nil
	case json.Number:
		return &node{kind: 's', scalar: t.String()}, nil
	case bool:
		return &node{kind: 's', scalar: strconv.FormatBool(t)}, nil
	case nil:
		return &node{kind: 's', scalar: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// text writes a string plain when YAML reads it back as the same text:
// "10s" and "10.0.0.0" plain, "10" and "1.5" quoted.
func text(s string) string {
	_, err := strconv.ParseFloat(s, 64)
	plain := s != "" && err != nil && !strings.ContainsAny(s[:1], "@`!&*-?:,[]{}#|>'\"%+.~ ") &&
		!strings.ContainsAny(s, "\n\t\"\\") && !strings.Contains(s, ": ") && !strings.Contains(s, " #") &&
		!strings.HasSuffix(s, " ") && !strings.HasSuffix(s, ":")
	switch strings.ToLower(s) {
	case "true", "false", "null", "y", "n", "yes", "no", "on", "off":
		plain = false
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}

func indent(b *bytes.Buffer, n int) {
	for range n {
		b.WriteString("  ")
	}
}

// writeBlock writes n as the value of a key or item at depth; inItem says
// the first line is already written after "- ".
func writeBlock(b *bytes.Buffer, n *node, depth int, inItem bool) {
	switch {
	case n.kind == '{' && len(n.obj) == 0:
		b.WriteString("{}\n")
	case n.kind == '[' && len(n.arr) == 0:
		b.WriteString("[]\n")
	case n.kind == '{':
		for i, e := range n.obj {
			if i > 0 || !inItem {
				indent(b, depth)
			}
			b.WriteString(text(e.k))
			b.WriteByte(':')
			if e.v.kind == 's' || len(e.v.obj) == 0 && len(e.v.arr) == 0 {
				b.WriteByte(' ')
				writeBlock(b, e.v, depth+1, false)
				continue
			}
			b.WriteByte('\n')
			d := depth + 1
			if e.v.kind == '[' {
				d = depth // a list under a key need not be indented
			}
			writeBlock(b, e.v, d, false)
		}
	case n.kind == '[':
		for _, e := range n.arr {
			indent(b, depth)
			b.WriteString("- ")
			writeBlock(b, e, depth+1, true)
		}
	default:
		b.WriteString(n.scalar)
		b.WriteByte('\n')
	}
}
