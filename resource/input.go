package resource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
)

// This file holds the checks on the YAML and JSON layer under the
// authoring format: input those layers would silently change (a YAML tag
// eating the start of a value, a repeated key whose last value wins) is
// rejected, and a JSON syntax error is reported as one.

// YAML tags.
//
// A plain YAML scalar that starts with "!" is a tag: `constraints:
// !exists(version)` is the tag "!exists(version)" on an empty value. The
// YAML library under sigs.k8s.io/yaml (yaml.v2) keeps only the text after
// an unknown tag, so the constraint would vanish and the variant match
// every client. yaml.v2 reports a node's tag nowhere but in the message of
// a type error, so findTags provokes one on every scalar: the same parser
// that converts the document tells exactly which values carry a tag, where
// a scan of the text could only guess.

// yamlTag is a scalar that carries a tag findTags does not accept.
type yamlTag struct {
	path  string // field path from the chunk's root, e.g. [1].constraints
	key   string // the mapping key holding the scalar; "" in a sequence
	line  int    // line in the chunk, 1-based
	tag   string // as yaml.v2 prints it, e.g. !exists(version)
	value string // what yaml.v2 kept of the value, cut to 7 bytes and "..." past 10
}

// tagProbe mirrors a YAML node: a sequence, a mapping, or a scalar with its
// tag and line. A null without a tag is never decoded into it (yaml.v2
// leaves the pointer nil), which is fine: it has no tag.
type tagProbe struct {
	seq        []*tagProbe
	m          map[any]*tagProbe
	tag, value string
	line       int
}

// tagProbeNever is a type no YAML node decodes into, so decoding a scalar
// into it fails with a type error that names the scalar's tag.
type tagProbeNever chan struct{}

// yamlTypeErrorRE reads yaml.v2's "line %d: cannot unmarshal %s%s into %s"
// (decoder.terror), where the second %s is " `value`" for a scalar.
var yamlTypeErrorRE = regexp.MustCompile("^line ([0-9]+): cannot unmarshal (\\S+)(?: `(.*)`)? into ")

// UnmarshalYAML implements yamlv2.Unmarshaler. A sequence and a mapping
// decode into their fields, recursing into children; anything else is a
// scalar, whose tag the provoked type error shows. A failed attempt stops
// at the node itself, so the probe stays linear in the document's size.
func (p *tagProbe) UnmarshalYAML(unmarshal func(any) error) error {
	if unmarshal(&p.seq) == nil {
		return nil
	}
	p.seq = nil
	if unmarshal(&p.m) == nil {
		return nil
	}
	p.m = nil
	var never tagProbeNever
	var te *yamlv2.TypeError
	if err := unmarshal(&never); errors.As(err, &te) && len(te.Errors) == 1 {
		if m := yamlTypeErrorRE.FindStringSubmatch(te.Errors[0]); m != nil {
			p.line, _ = strconv.Atoi(m[1])
			p.tag, p.value = m[2], m[3]
		}
	}
	return nil
}

// findTags lists the scalars of a YAML chunk that carry a tag other than
// the standard ones ("!!str" and the like, which only say what the value
// plainly is) and the non-specific "!" (which makes a string), in line
// order. The chunk has already converted to JSON, so it parses.
func findTags(chunk []byte) []yamlTag {
	var root tagProbe
	if err := yamlv2.Unmarshal(chunk, &root); err != nil {
		return nil
	}
	var out []yamlTag
	var walk func(p *tagProbe, path, key string)
	walk = func(p *tagProbe, path, key string) {
		switch {
		case p == nil:
		case p.seq != nil:
			for i, c := range p.seq {
				walk(c, fmt.Sprintf("%s[%d]", path, i), "")
			}
		case p.m != nil:
			for k, c := range p.m {
				ks := fmt.Sprint(k)
				walk(c, joinPath(path, ks), ks)
			}
		case p.tag != "" && p.tag != "!" && !strings.HasPrefix(p.tag, "!!"):
			tag := p.tag
			if !strings.HasPrefix(tag, "!") { // yaml.v2 prints a verbatim !<x> as x
				tag = "!<" + tag + ">"
			}
			out = append(out, yamlTag{path: path, key: key, line: p.line, tag: tag, value: p.value})
		}
	}
	walk(&root, "", "")
	sort.Slice(out, func(i, j int) bool {
		if out[i].line != out[j].line {
			return out[i].line < out[j].line
		}
		return out[i].path < out[j].path
	})
	return out
}

// mayHaveTag reports whether text has a '!' where a YAML tag can start:
// at the start of a line or after a blank or a flow indicator. Most
// documents have none (a '!' in "env!=prod" cannot be a tag), and they are
// spared findTags, which costs about as much as converting the document.
func mayHaveTag(text []byte) bool {
	for i := bytes.IndexByte(text, '!'); i >= 0; {
		if i == 0 || strings.IndexByte(" \t\r\n[{,", text[i-1]) >= 0 {
			return true
		}
		j := bytes.IndexByte(text[i+1:], '!')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// tagErrors turns the tags found under prefix (a document's path in its
// chunk: "" for the whole chunk, "[i]" for an item of a top-level list)
// into errors for the document at loc. c is the chunk, for the line
// numbers and the text of each tagged line.
func tagErrors(loc Location, tags []yamlTag, prefix string, c yamlChunk) ErrorList {
	var errs ErrorList
	for _, t := range tags {
		path, ok := strings.CutPrefix(t.path, prefix)
		if !ok || prefix != "" && path != "" && path[0] != '.' && path[0] != '[' {
			continue
		}
		path = strings.TrimPrefix(path, ".")
		// The text from the tag to the end of its line is what the author
		// meant as the value; yaml.v2's copy of the rest may be cut short.
		text, kept := t.tag, t.value
		if l := chunkLine(c.text, t.line); strings.Contains(l, t.tag) {
			text = stripComment(l[strings.Index(l, t.tag):])
			kept = strings.TrimSpace(text[len(t.tag):])
		} else if kept != "" {
			text += " " + kept
		}
		var lost string
		switch {
		case kept != "":
			lost = fmt.Sprintf("so only %q was kept", kept)
		case path == "constraints":
			lost = "so the constraint was dropped and the variant would match every client"
		default:
			lost = "so the value was dropped"
		}
		errs = append(errs, loc.errorf(path, "YAML read %s on line %d as a tag, not as text, %s; quote a value that starts with \"!\": %s",
			t.tag, t.line+c.line-1, lost, quotedSuggestion(t.key, text)))
	}
	return errs
}

// tagLineRE finds a line whose value starts with what YAML reads as a tag:
// `key: !x...` or `- !x...`, but not a standard "!!" tag, the verbatim
// "!<...>" form or the non-specific "! ".
var tagLineRE = regexp.MustCompile(`^[ \t]*(?:-[ \t]+)?(?:("[^"]*"|'[^']*'|[^\s"'#!-][^:#]*?)[ \t]*:[ \t]+)?(![^!<\s]\S*)(.*)$`)

// tagHint explains a YAML syntax error that a tag probably caused, such
// as `constraints: !exists(version) && env=prod`, where YAML reads a tag
// and then an anchor "&" it cannot parse. The document does not parse, so
// this looks at the text: the first line whose value starts with "!".
func tagHint(c yamlChunk) string {
	for i, l := range strings.Split(string(c.text), "\n") {
		m := tagLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := stripComment(m[2] + m[3])
		return fmt.Sprintf(" (YAML reads %s on line %d as a tag; quote a value that starts with \"!\": %s)",
			m[2], i+c.line, quotedSuggestion(m[1], text))
	}
	return ""
}

// quotedSuggestion shows how to write text as a quoted YAML value under
// key, or as a sequence item when key is "". Go's quoting is valid YAML
// double-quoted style.
func quotedSuggestion(key, text string) string {
	if key == "" {
		return "- " + strconv.Quote(text)
	}
	return key + ": " + strconv.Quote(text)
}

var commentRE = regexp.MustCompile(`[ \t]+#.*$`)

// stripComment drops a trailing YAML comment (a '#' after a blank) and
// surrounding blanks.
func stripComment(s string) string {
	return strings.TrimSpace(commentRE.ReplaceAllString(s, ""))
}

// chunkLine returns line n (1-based) of text, or "" if there is none.
func chunkLine(text []byte, n int) string {
	for i := 1; len(text) > 0; i++ {
		l, rest, _ := bytes.Cut(text, []byte("\n"))
		if i == n {
			return string(l)
		}
		text = rest
	}
	return ""
}

// Duplicate keys.

// yamlDupRE reads yaml.v2's strict-mode "line %d: key %#v already set in
// map".
var yamlDupRE = regexp.MustCompile(`^line ([0-9]+): key (.*) already set in map$`)

// duplicateKeyErrors rewrites the error of a strict YAML conversion that
// failed only on repeated keys, with lines counted from the start of the
// source (the chunk starts on line first). It returns nil for any other
// error.
func duplicateKeyErrors(loc Location, err error, first int) ErrorList {
	var te *yamlv2.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return nil
	}
	var errs ErrorList
	for _, e := range te.Errors {
		m := yamlDupRE.FindStringSubmatch(e)
		if m == nil {
			return nil
		}
		n, _ := strconv.Atoi(m[1])
		errs = append(errs, loc.errorf("", "duplicate key %s on line %d: a key may appear only once in a mapping (otherwise the last would silently win)", m[2], n+first-1))
	}
	return errs
}

// jsonDuplicateKey finds the first key that repeats within one object of
// the valid JSON js: its field path, the key, and the offset in js where
// the repeated key starts. encoding/json and protojson would keep the last
// value silently.
func jsonDuplicateKey(js []byte) (path, key string, off int, found bool) {
	type frame struct {
		obj     bool
		path    string
		keys    map[string]bool
		wantKey bool   // object: the next token is a key
		cur     string // object: path of the current key's value
		n       int    // array: index of the next element
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return "", "", 0, false // io.EOF: js is valid JSON
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			k, _ := tok.(string)
			if top.keys[k] {
				// before is where the previous token ended; the key starts
				// after the separator.
				for before < len(js) && strings.IndexByte(", \t\r\n", js[before]) >= 0 {
					before++
				}
				return joinPath(top.path, k), k, before, true
			}
			top.keys[k] = true
			top.wantKey, top.cur = false, joinPath(top.path, k)
			continue
		}
		var vpath string
		if top != nil {
			if top.obj {
				vpath, top.wantKey = top.cur, true
			} else {
				vpath = fmt.Sprintf("%s[%d]", top.path, top.n)
				top.n++
			}
		}
		if d, ok := tok.(json.Delim); ok {
			f := &frame{obj: d == '{', path: vpath, wantKey: d == '{'}
			if f.obj {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
		}
	}
}

// JSON syntax.

// jsonSyntaxError reports where data, meant as JSON, fails to parse: the
// line, and the column of the offending byte (or just past the last one
// when the input ends early). It returns nil if data is valid JSON.
func jsonSyntaxError(source string, data []byte) *DocError {
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return &DocError{Source: source, Msg: "invalid JSON: " + err.Error()}
	}
	// Offset counts the bytes read, the offending one included; input
	// that ends early is pointed at just past its last byte.
	p := max(int(se.Offset)-1, 0)
	if strings.HasPrefix(se.Error(), "unexpected end") {
		p = len(bytes.TrimRight(data, " \t\r\n"))
	}
	line := bytes.Count(data[:p], []byte("\n")) + 1
	col := p - (bytes.LastIndexByte(data[:p], '\n') + 1) + 1
	return &DocError{Source: source, Line: line, Msg: fmt.Sprintf("invalid JSON at column %d: %s", col, se.Error())}
}
