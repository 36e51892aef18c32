package resource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"google.golang.org/protobuf/proto"
)

// DecodeMessage reads a source holding one YAML or JSON document into m,
// a message of any type (an Envoy bootstrap, say), with the authoring
// format's YAML (YAML 1.2 scalars, no repeated keys, Envoy's !ignore keys
// left out), and validates it as Validate does. It returns an ErrorList
// whose errors are placed at the file, line and column of what is wrong.
func DecodeMessage(source string, data []byte, m proto.Message) error {
	var (
		texts []*docText
		errs  ErrorList
	)
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		off := bytes.Index(data, t[:1])
		line, col := lineCol(data, off)
		texts = append(texts, &docText{loc: Location{Source: source, Index: 1, Line: line, Column: col}, js: t, pos: jsonPositions{js: t, line: line, col: col}, unchecked: true})
	} else {
		ys := yamlSource{source: source, reparsed: new(atomic.Int32)}
		err := yamlChunks(bytes.NewReader(data), func(c yamlChunk) bool {
			ys.chunk(c, func(t *docText) { texts = append(texts, t) }, func(e ErrorList) { errs = append(errs, e...) })
			return true
		}, func(line int) {
			errs = append(errs, &DocError{Source: source, Line: line, Msg: fmt.Sprintf("a document larger than %d bytes", MaxDocumentBytes)})
		})
		if err != nil {
			return &ReadError{Source: source, Err: err}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	switch len(texts) {
	case 0:
		return ErrorList{{Source: source, Msg: "empty: want one document"}}
	case 1:
	default:
		return ErrorList{texts[1].loc.errorf("", "a second document: want one")}
	}
	t := texts[0]
	if p, off, first, dup, _ := duplicateKey(t.js); dup {
		line, _ := t.pos.at(first)
		return ErrorList{t.errAt(off, p, "duplicate key (first on line %d): a key may appear only once in an object (otherwise the last would silently win)", line)}
	}
	if e := t.unmarshal(t.js, 0, m); e != nil {
		return ErrorList{e}
	}
	for _, fe := range Validate(m) {
		errs = append(errs, t.errPath(fe.Path, "%s", fe.Msg))
	}
	return errs.err()
}
