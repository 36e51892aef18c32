package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/clientcheck"
)

// The agents a --fleet file may declare: grpc stands for any gRPC
// client (every grpc-* agent is checked alike).
var fleetAgents = []string{"envoy", "grpc", "grpc-go", "grpc-java", "grpc-js", "grpc-cpp", "xdsd", "other"}

// readFleet reads a --fleet file: the clients an operator declares, for
// the client checks to check for whether or not they are connected.
//
//	clients:
//	- {agent: envoy, params: {env: prod}}
//	- {agent: grpc}
//
// Errors name the file, line and column.
func readFleet(path string) ([]clientcheck.Group, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--fleet: %v", err)
	}
	gs, err := parseFleet(data, path)
	if err != nil {
		return nil, usagef("--fleet: %v", err)
	}
	return gs, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

func parseFleet(data []byte, file string) ([]clientcheck.Group, error) {
	const want = `want a mapping with "clients", a list such as [{agent: envoy, params: {env: prod}}, {agent: grpc}]`
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", file, m[1], strings.TrimPrefix(msg, m[0]))
		}
		return nil, fmt.Errorf("%s: %s", file, msg)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty: %s", file, want)
	}
	perr := func(n *yaml.Node, path, format string, args ...any) error {
		return fmt.Errorf("%s:%d:%d: %s: %s", file, n.Line, n.Column, path, fmt.Sprintf(format, args...))
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, perr(root, "fleet", "%s", want)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "clients" {
			return nil, perr(k, k.Value, `unknown field (want "clients")`)
		}
		list = v
	}
	if list == nil {
		return nil, perr(root, "fleet", `no "clients": %s`, want)
	}
	if list.Kind != yaml.SequenceNode {
		return nil, perr(list, "clients", "%s", want)
	}
	var out []clientcheck.Group
	for i, n := range list.Content {
		path := fmt.Sprintf("clients[%d]", i)
		if n.Kind != yaml.MappingNode {
			return nil, perr(n, path, "want a mapping such as {agent: envoy, params: {env: prod}}")
		}
		g := clientcheck.Group{Declared: true}
		var agentNode *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			fp := path + "." + k.Value
			switch k.Value {
			case "agent":
				if v.Kind != yaml.ScalarNode || !slices.Contains(fleetAgents, v.Value) {
					return nil, perr(v, fp, "unknown agent %q: want one of %s", v.Value, strings.Join(fleetAgents, ", "))
				}
				g.Agent, agentNode = v.Value, v
			case "params":
				if v.Kind != yaml.MappingNode {
					return nil, perr(v, fp, "want a mapping of parameter names to values, such as {env: prod, version: v1}")
				}
				g.Params = constraint.Params{}
				for m := 0; m+1 < len(v.Content); m += 2 {
					pk, pv := v.Content[m], v.Content[m+1]
					if pv.Kind != yaml.ScalarNode || pk.Kind != yaml.ScalarNode {
						return nil, perr(pv, fp+"."+pk.Value, "want a value such as prod (a string; quote it if it reads as something else)")
					}
					if _, dup := g.Params[pk.Value]; dup {
						return nil, perr(pk, fp+"."+pk.Value, "given twice")
					}
					g.Params[pk.Value] = pv.Value
				}
			default:
				return nil, perr(k, fp, `unknown field (want "agent" and "params")`)
			}
		}
		if agentNode == nil {
			return nil, perr(n, path, "no agent: want one of %s", strings.Join(fleetAgents, ", "))
		}
		out = append(out, g)
	}
	return out, nil
}
