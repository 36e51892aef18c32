package resource

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"sigs.k8s.io/yaml"

	"github.com/xdsd/xdsd/constraint"
)

// Document is one authored resource variant, decoded and validated.
type Document struct {
	Location
	// Variant has no version: the store gives it one when it is applied.
	Variant *Variant
	// Message is the decoded payload.
	Message proto.Message
	// Raw is the document as JSON, as written (YAML converted).
	Raw json.RawMessage
}

// MaxDocumentBytes bounds one source file or request body.
const MaxDocumentBytes = 64 << 20

// Load reads documents from a file, from every *.yaml, *.yml and *.json file
// under a directory (in lexical order, skipping hidden entries), or from
// standard input when path is "-". All problems in all files are reported
// together, each once: the set checks (ValidateSet) run once over all the
// files, not per file and again for the whole.
func Load(path string) ([]*Document, error) {
	if path == "-" {
		data, err := io.ReadAll(io.LimitReader(os.Stdin, MaxDocumentBytes+1))
		if err != nil {
			return nil, ErrorList{{Source: "-", Msg: err.Error()}}
		}
		return Decode("-", data)
	}
	files, err := SourceFiles(path)
	if err != nil {
		return nil, ErrorList{{Source: path, Msg: err.Error()}}
	}
	var (
		docs []*Document
		errs ErrorList
	)
	for _, f := range files {
		read := ReadSource
		if f == path {
			// Named by the user, it is read whatever it is: a pipe
			// such as bash's <(...) too.
			read = readAll
		}
		data, err := read(f)
		if err != nil {
			errs = append(errs, &DocError{Source: f, Msg: err.Error()})
			continue
		}
		d, derrs := decode(f, data, false)
		docs = append(docs, d...)
		errs = append(errs, derrs...)
	}
	if err := ValidateSet(docs); err != nil {
		errs = append(errs, err.(ErrorList)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return docs, nil
}

// ErrNotRegular is returned by ReadSource for a file that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// ReadSource reads an authoring file found in a directory. Only a regular
// file (or a symbolic link to one) is read: a FIFO named *.yaml would block
// the reader forever, and a device could be endless. Anything else is an
// error wrapping ErrNotRegular rather than skipped, since the resources the
// author meant it to hold would silently go missing (and, under --watch,
// be deleted).
func ReadSource(path string) ([]byte, error) {
	// Non-blocking, so that opening a FIFO does not wait for a writer;
	// the type is checked on what was opened, so a file swapped in
	// between cannot slip through.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s): only regular files in a directory are read", ErrNotRegular, fileKind(st.Mode()))
	}
	return readLimited(f)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.Type().String()
}

// readAll reads a file named by the user, whatever its type.
func readAll(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f)
}

// readLimited reads at most one byte more than MaxDocumentBytes, enough
// for decode to report the source as too large.
func readLimited(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
}

// SourceFiles lists the authoring files Load reads for path.
func SourceFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != path && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && IsSourceFile(p) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// IsSourceFile reports whether a file name has an authoring extension.
func IsSourceFile(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

type rawDoc struct {
	loc Location
	js  []byte
}

// Decode parses one source holding YAML documents (separated by ---), a JSON
// object or a JSON array, each document a bare resource or a wrapper
// (docs/architecture.md §4.2). It returns every document that is valid and an
// ErrorList of every one that is not; callers applying a batch must apply
// nothing when the error is non-nil.
func Decode(source string, data []byte) ([]*Document, error) {
	return decodeSet(source, data, false)
}

// DecodeJSON is Decode for a source known to be JSON (a request body sent
// as application/json): it must be strict JSON, as a source whose name
// ends in .json must be.
func DecodeJSON(source string, data []byte) ([]*Document, error) {
	return decodeSet(source, data, true)
}

func decodeSet(source string, data []byte, strictJSON bool) ([]*Document, error) {
	docs, errs := decode(source, data, strictJSON)
	if err := ValidateSet(docs); err != nil {
		errs = append(errs, err.(ErrorList)...)
	}
	return docs, errs.err()
}

// decode is Decode without the set checks, which Load runs once over all
// its files.
func decode(source string, data []byte, strictJSON bool) ([]*Document, ErrorList) {
	if len(data) > MaxDocumentBytes {
		return nil, ErrorList{{Source: source, Msg: fmt.Sprintf("larger than %d bytes", MaxDocumentBytes)}}
	}
	raws, errs := split(source, data, strictJSON)
	var docs []*Document
	for _, r := range raws {
		d, derrs := decodeDoc(r.loc, r.js)
		errs = append(errs, derrs...)
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs, errs
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// split cuts a source into JSON documents, remembering where each began.
// A source named *.json, or one known to be JSON, must be strict JSON: YAML
// would also take single quotes, a trailing comma or unquoted keys, which
// other JSON tools then refuse.
func split(source string, data []byte, strictJSON bool) ([]rawDoc, ErrorList) {
	trimmed := bytes.TrimSpace(data)
	strict := strictJSON || strings.EqualFold(filepath.Ext(source), ".json")
	if strict && len(trimmed) > 0 && !json.Valid(trimmed) {
		if e := jsonSyntaxError(source, data); e != nil {
			return nil, ErrorList{e}
		}
	}
	looksJSON := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	if looksJSON && json.Valid(trimmed) {
		return splitJSON(source, data)
	}
	// YAML is a superset of JSON, so JSON that is not valid JSON is still
	// tried as YAML (a flow mapping without quotes reads fine). If that
	// fails too, the author wrote JSON, and a complaint from the YAML
	// parser about ',' or '}' would only mislead.
	out, errs, syntax := splitYAMLSource(source, data)
	if syntax && looksJSON {
		if e := jsonSyntaxError(source, data); e != nil {
			return nil, ErrorList{e}
		}
	}
	return out, errs
}

// splitYAMLSource is split for YAML. syntax reports whether some document
// did not parse as YAML at all.
func splitYAMLSource(source string, data []byte) (out []rawDoc, errs ErrorList, syntax bool) {
	index := 0
	for _, c := range splitYAML(data) {
		if isBlankYAML(c.text) {
			continue
		}
		// Strict, so that a repeated key is an error rather than a value
		// silently replaced by the last one.
		js, err := yaml.YAMLToJSONStrict(c.text)
		if err != nil {
			index++
			loc := Location{Source: source, Index: index, Line: c.line}
			if dups := duplicateKeyErrors(loc, err, c.line); dups != nil {
				errs = append(errs, dups...)
				continue
			}
			syntax = true
			msg := yamlLineRE.ReplaceAllStringFunc(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "), func(m string) string {
				n, _ := strconv.Atoi(m[5:])
				return fmt.Sprintf("line %d", n+c.line-1)
			})
			errs = append(errs, loc.errorf("", "invalid YAML: %s%s", msg, tagHint(c)))
			continue
		}
		var tags []yamlTag
		if mayHaveTag(c.text) {
			tags = findTags(c.text)
		}
		js = bytes.TrimSpace(js)
		if len(js) > 0 && js[0] == '[' {
			var items []json.RawMessage
			if err := json.Unmarshal(js, &items); err == nil {
				for i, it := range items {
					index++
					loc := Location{Source: source, Index: index, Line: c.line}
					if terrs := tagErrors(loc, tags, fmt.Sprintf("[%d]", i), c); len(terrs) > 0 {
						errs = append(errs, terrs...)
						continue
					}
					out = append(out, rawDoc{loc: loc, js: it})
				}
				continue
			}
		}
		if string(js) == "null" {
			continue
		}
		index++
		loc := Location{Source: source, Index: index, Line: c.line}
		if terrs := tagErrors(loc, tags, "", c); len(terrs) > 0 {
			errs = append(errs, terrs...)
			continue
		}
		out = append(out, rawDoc{loc: loc, js: js})
	}
	return out, errs, syntax
}

func splitJSON(source string, data []byte) ([]rawDoc, ErrorList) {
	// Offsets asked for only grow, so lines are counted from the last one:
	// counting from the start every time took time quadratic in the
	// number of documents.
	var atOff, atLine int64 = 0, 1
	lineAt := func(off int64) int {
		if off < atOff {
			atOff, atLine = 0, 1
		}
		atLine += int64(bytes.Count(data[atOff:off], []byte("\n")))
		atOff = off
		return int(atLine)
	}
	// A repeated key would reach decodeDoc as one key holding the last
	// value, so it is caught here, where the raw text still shows it.
	checked := func(loc Location, js []byte, start int64) ([]rawDoc, ErrorList) {
		if path, key, off, dup := jsonDuplicateKey(js); dup {
			return nil, ErrorList{loc.errorf(path, "duplicate key %q on line %d: a key may appear only once in an object (otherwise the last would silently win)", key, lineAt(start+int64(off)))}
		}
		return []rawDoc{{loc: loc, js: js}}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	trimmed := bytes.TrimSpace(data)
	if trimmed[0] == '{' {
		start := int64(bytes.IndexByte(data, '{'))
		return checked(Location{Source: source, Index: 1, Line: lineAt(start)}, trimmed, start)
	}
	if _, err := dec.Token(); err != nil { // '['
		return nil, ErrorList{{Source: source, Msg: "invalid JSON: " + err.Error()}}
	}
	var (
		out  []rawDoc
		errs ErrorList
	)
	for i := 1; dec.More(); i++ {
		off := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out, append(errs, &DocError{Source: source, Index: i, Msg: "invalid JSON: " + err.Error()})
		}
		// InputOffset is before the separating comma and whitespace.
		for int(off) < len(data) && strings.ContainsRune(", \t\r\n", rune(data[off])) {
			off++
		}
		d, derrs := checked(Location{Source: source, Index: i, Line: lineAt(off)}, raw, off)
		out = append(out, d...)
		errs = append(errs, derrs...)
	}
	return out, errs
}

type yamlChunk struct {
	text []byte
	line int // first line of the chunk in the source
}

// splitYAML cuts a YAML stream at document markers: a line starting with
// "---" (content after it on the same line belongs to the new document) or
// "..." (end of document).
func splitYAML(data []byte) []yamlChunk {
	var (
		out  []yamlChunk
		cur  bytes.Buffer
		line = 0
		at   = 1
	)
	flush := func(next int) {
		out = append(out, yamlChunk{text: append([]byte(nil), cur.Bytes()...), line: at})
		cur.Reset()
		at = next
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), MaxDocumentBytes+1)
	for sc.Scan() {
		line++
		l := sc.Text()
		switch {
		case l == "---" || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "---\t"):
			flush(line)
			rest := strings.TrimSpace(l[3:])
			if rest != "" && !strings.HasPrefix(rest, "#") {
				cur.WriteString(rest)
				cur.WriteByte('\n')
			} else {
				at = line + 1
			}
		case l == "..." || strings.HasPrefix(l, "... "):
			flush(line + 1)
		default:
			if cur.Len() == 0 && strings.TrimSpace(l) == "" {
				at = line + 1
			}
			cur.WriteString(l)
			cur.WriteByte('\n')
		}
	}
	flush(line + 1)
	return out
}

func isBlankYAML(b []byte) bool {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

var wrapperKeys = map[string]bool{"name": true, "type": true, "constraints": true, "resource": true, "do_not_cache": true, "ttl": true}

// MinTTL is the shortest TTL a resource may have: a client holding it is
// sent a heartbeat every half TTL.
const MinTTL = 100 * time.Millisecond

func decodeDoc(loc Location, js []byte) (*Document, ErrorList) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return nil, ErrorList{loc.errorf("", "a document must be an object: a resource with \"@type\", or a wrapper with \"resource\"")}
	}
	var (
		errs    ErrorList
		resRaw  = js
		resPath string
		wName   string
		wType   string
		cons    constraint.Constraints
		dnc     bool
		ttl     time.Duration
	)
	if _, bare := top["@type"]; !bare {
		var keys []string
		for k := range top {
			if !wrapperKeys[k] {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, loc.errorf(k, "unknown field (a wrapper has name, type, constraints, do_not_cache, ttl and resource; a bare resource starts with \"@type\")"))
		}
		raw, ok := top["resource"]
		if !ok {
			errs = append(errs, loc.errorf("resource", "missing: a wrapper must hold the resource"))
			return nil, errs
		}
		resRaw, resPath = raw, "resource"
		if r, ok := top["name"]; ok {
			if err := json.Unmarshal(r, &wName); err != nil {
				errs = append(errs, loc.errorf("name", "must be a string"))
			}
		}
		if r, ok := top["type"]; ok {
			if err := json.Unmarshal(r, &wType); err != nil {
				errs = append(errs, loc.errorf("type", "must be a string"))
			}
		}
		if r, ok := top["do_not_cache"]; ok {
			if err := json.Unmarshal(r, &dnc); err != nil {
				errs = append(errs, loc.errorf("do_not_cache", "must be true or false"))
			}
		}
		if r, ok := top["ttl"]; ok {
			var txt string
			d, err := time.Duration(0), json.Unmarshal(r, &txt)
			if err == nil {
				d, err = time.ParseDuration(txt)
			}
			switch {
			case err != nil:
				errs = append(errs, loc.errorf("ttl", "must be a duration such as \"30s\" or \"1m30s\""))
			case d < MinTTL:
				errs = append(errs, loc.errorf("ttl", "%s is shorter than the minimum %s (clients holding it get a heartbeat every half TTL)", d, MinTTL))
			default:
				ttl = d
			}
		}
		if r, ok := top["constraints"]; ok {
			c, err := decodeConstraints(r)
			if err != nil {
				errs = append(errs, loc.errorf("constraints", "%v", err))
			}
			cons = c
		}
	}

	var res map[string]json.RawMessage
	if err := json.Unmarshal(resRaw, &res); err != nil || res == nil {
		return nil, append(errs, loc.errorf(resPath, "must be an object with \"@type\""))
	}
	var typeURL string
	if r, ok := res["@type"]; !ok {
		return nil, append(errs, loc.errorf(joinPath(resPath, "@type"), "missing: every resource names its type, e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster"))
	} else if err := json.Unmarshal(r, &typeURL); err != nil || typeURL == "" {
		return nil, append(errs, loc.errorf(joinPath(resPath, "@type"), "must be a non-empty string"))
	}
	if !strings.Contains(typeURL, "/") {
		typeURL = TypePrefix + typeURL
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
	if err != nil {
		return nil, append(errs, loc.errorf(joinPath(resPath, "@type"), "unknown message type %q", typeURL))
	}
	payloadURL := TypePrefix + string(mt.Descriptor().FullName())

	typ := ForURL(payloadURL)
	if wType != "" {
		t, err := Lookup(wType)
		if err != nil {
			return nil, append(errs, loc.errorf("type", "%v", err))
		}
		typ = t
	}
	if !typ.Known {
		return nil, append(errs, loc.errorf(joinPath(resPath, "@type"), "%s is not an xDS resource type xdsd serves", mt.Descriptor().FullName()))
	}
	if ttl > 0 && typ.URL == VirtualHostURL {
		errs = append(errs, loc.errorf("ttl", "on-demand virtual hosts take no TTL (Envoy does not renew them by heartbeat)"))
	}
	if typ.URL != payloadURL && payloadURL != LocatorURL {
		return nil, append(errs, loc.errorf("type", "the resource is a %s, not a %s (only a redirect, an xds.core.v3.ResourceLocator, may be served as another type)", mt.Descriptor().FullName(), typ.Name))
	}

	delete(res, "@type")
	var (
		msg  proto.Message
		body []byte
	)
	if typ.Element != nil && payloadURL == typ.URL {
		msg, body, errs = decodeCollection(loc, resPath, typ, res, errs)
		if msg == nil {
			return nil, errs
		}
	} else {
		msg = mt.New().Interface()
		if perrs := unmarshalJSON(loc, resPath, res, msg); len(perrs) > 0 {
			return nil, append(errs, perrs...)
		}
	}

	// The name: from the wrapper, else from the payload's own name field.
	own := typ.NameOf(msg)
	if payloadURL != typ.URL {
		own = "" // a redirect's payload names its target, not itself
	}
	n := wName
	if n == "" {
		n = own
	}
	if n == "" {
		where := "name"
		if typ.NameField != "" && payloadURL == typ.URL {
			where = joinPath(resPath, typ.NameField)
		}
		return nil, append(errs, loc.errorf(where, "missing: the resource needs a name"))
	}
	canon, err := CheckName(typ, n)
	if err != nil {
		where := "name"
		if wName == "" {
			where = joinPath(resPath, typ.NameField)
		}
		return nil, append(errs, loc.errorf(where, "%v", err))
	}
	if payloadURL == typ.URL && typ.NameField != "" {
		if own == "" {
			// A wrapper name fills in an empty payload name, so authors
			// need not write it twice.
			typ.SetNameOf(msg, n)
		} else if c, err := CanonicalName(own); err != nil || c != canon {
			return nil, append(errs, loc.errorf(joinPath(resPath, typ.NameField), "%q differs from the resource name %q: a resource's own name must equal the name it is served under", own, n))
		}
	}

	if body == nil { // a collection's entries were validated one by one
		for _, fe := range validateAuthored(msg, 1) {
			errs = append(errs, loc.errorf(joinPath(resPath, fe.Path), "%s", fe.Msg))
		}
	}
	if payloadURL == LocatorURL {
		if err := checkRedirect(msg, typ); err != nil {
			errs = append(errs, loc.errorf(resPath, "%v", err))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if body == nil {
		if body, err = Marshal(msg); err != nil {
			return nil, ErrorList{loc.errorf(resPath, "cannot encode: %v", err)}
		}
	}
	v := NewVariant(typ, canon, cons, "", payloadURL, body)
	v.DoNotCache = dnc
	v.TTL = ttl
	return &Document{Location: loc, Variant: v, Message: msg, Raw: js}, nil
}

func unmarshalJSON(loc Location, resPath string, res map[string]json.RawMessage, msg proto.Message) ErrorList {
	flat, err := json.Marshal(res)
	if err != nil {
		return ErrorList{loc.errorf(resPath, "%v", err)}
	}
	lines := lineEach(flat)
	if err := protojson.Unmarshal(lines, msg); err != nil {
		p, m := protojsonErrorPath(err, lines)
		return ErrorList{loc.errorf(joinPath(resPath, p), "%s", m)}
	}
	return nil
}

// noConstraints ends the error for a constraints field that is present
// but says nothing. It is most often `constraints: !exists(version)`
// unquoted, which YAML reads as a tag on an empty value; taking it as
// unconstrained would serve the variant to every client.
const noConstraints = `leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`

func decodeConstraints(r json.RawMessage) (constraint.Constraints, error) {
	if string(bytes.TrimSpace(r)) == "null" {
		return constraint.Constraints{}, errors.New("null: " + noConstraints)
	}
	var s string
	if err := json.Unmarshal(r, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return constraint.Constraints{}, errors.New("empty: " + noConstraints)
		}
		return constraint.Parse(s)
	}
	var p discoveryv3.DynamicParameterConstraints
	if err := protojson.Unmarshal(r, &p); err != nil {
		return constraint.Constraints{}, fmt.Errorf("neither constraint text (a string) nor DynamicParameterConstraints JSON: %v", trimProto(err.Error()))
	}
	return constraint.FromProto(&p)
}

// ValidateSet checks a set of documents meant to be applied together: no
// variant is defined twice, and the variants of each resource obey TP2's
// rules (same key set, mutually exclusive; constraint.ValidateVariants).
func ValidateSet(docs []*Document) error {
	var errs ErrorList
	seen := map[Key]*Document{}
	groups := map[[2]string][]*Document{}
	var order [][2]string
	for _, d := range docs {
		k := d.Variant.Key()
		if first, ok := seen[k]; ok {
			errs = append(errs, d.Location.errorf("", "%s is defined twice; first in %s", describe(d.Variant), first.Location))
			continue
		}
		seen[k] = d
		g := [2]string{k.Type, k.Name}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], d)
	}
	for _, g := range order {
		ds := groups[g]
		if len(ds) < 2 {
			continue
		}
		vs := make([]constraint.Variant, len(ds))
		for i, d := range ds {
			vs[i] = constraint.Variant{ID: variantID(d.Variant.Constraints, d.Location), Constraints: d.Variant.Constraints}
		}
		if err := constraint.ValidateVariants(vs); err != nil {
			d := ds[0]
			errs = append(errs, d.Location.errorf("constraints", "variants of %s %s: %v", ForURL(g[0]).Name, g[1], err))
		}
	}
	return errs.err()
}

func variantID(c constraint.Constraints, loc Location) string {
	s := c.String()
	if s == "" {
		s = "(unconstrained)"
	}
	if l := loc.String(); l != "" {
		return fmt.Sprintf("%q (%s)", s, l)
	}
	return fmt.Sprintf("%q", s)
}

func describe(v *Variant) string {
	s := v.Type.Name + " " + v.Name
	if !v.Constraints.IsZero() {
		s += " [" + v.Constraints.String() + "]"
	}
	return s
}
