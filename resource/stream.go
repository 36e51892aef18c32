package resource

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xdsd/xdsd/internal/docprep"
)

// This file reads sources as streams: a source of any size is decoded a
// document at a time, on every core, and handed to the caller in order,
// so that memory grows with what the caller keeps, not with the source.

// MaxDocumentBytes bounds one document of a source (a YAML document, or
// an element of a JSON array). Sources themselves are not bounded.
const MaxDocumentBytes = 64 << 20

// Format says how a source is read.
type Format int

const (
	// Auto reads YAML. A document (or the whole source) that is valid JSON
	// is read as JSON, and one that starts like JSON but is neither is
	// reported as broken JSON.
	Auto Format = iota
	// JSON reads strict JSON: one object, or an array of objects. YAML
	// would also take single quotes, a trailing comma or unquoted keys,
	// which other JSON tools then refuse.
	JSON
)

// FormatOf is the format of a file by its name: JSON for *.json.
func FormatOf(name string) Format {
	if strings.EqualFold(filepath.Ext(name), ".json") {
		return JSON
	}
	return Auto
}

// positions map an offset of a document's JSON to a line and column of
// its source.
type positions interface {
	at(off int) (line, col int)
}

// docText is one document of a source as JSON, before decoding, with the
// way back to the source.
type docText struct {
	loc Location
	js  []byte
	pos positions
	// unchecked is JSON as written, not yet known to be valid; JSON made
	// from YAML is.
	unchecked bool
}

// errAt is an error about what starts at offset off of the document's
// JSON.
func (d *docText) errAt(off int, path, format string, args ...any) *DocError {
	e := d.loc.errorf(path, format, args...)
	if l, c := d.pos.at(off); l > 0 {
		e.Line, e.Column = l, c
	}
	return e
}

// errPath is an error about a field path of the document, placed where
// the field (or the deepest part of its path that exists) is written.
func (d *docText) errPath(path, format string, args ...any) *DocError {
	return d.errAt(offsetOf(d.js, path), path, format, args...)
}

// ReadError is a failure to read a source (as opposed to a problem with
// what it holds).
type ReadError struct {
	Source string
	Err    error
}

func (e *ReadError) Error() string { return e.Source + ": reading: " + e.Err.Error() }

// Unwrap returns the reader's error.
func (e *ReadError) Unwrap() error { return e.Err }

// DecodeReader reads the documents of one source (named source in
// errors) from r and calls fn with each valid one, in order, on the
// calling goroutine. Documents are decoded on every core; the source is
// read a document at a time. It returns nil; fn's error, having stopped
// at it; a *ReadError; or an ErrorList of every invalid
// document. A caller applying a batch must apply nothing unless it
// returns nil. Set checks (SetCheck) are the caller's.
//
// Within the module, a reader that implements docprep.Reader has each
// valid document prepared on the goroutine that decoded it, with the Any
// values its validation decoded (the client checks).
func DecodeReader(source string, r io.Reader, f Format, fn func(*Document) error) error {
	st := &stream{source: source, fn: fn}
	if p, ok := r.(docprep.Reader[*Document]); ok {
		st.prepare = p.Prepare
	}
	if err := st.run(r, f); err != nil {
		return err
	}
	return st.errs.err()
}

// maxErrors bounds the problems reported for one source: past them, the
// rest of the source is still read, and counted.
const maxErrors = 1000

// stream decodes one source.
type stream struct {
	source   string
	fn       func(*Document) error
	prepare  func(*Document, *docprep.Anys) // nil, or called on the decoding goroutine
	errs     ErrorList
	dropped  int
	reparsed atomic.Int32
	base     int // documents of YAML chunks handed over so far
}

func (st *stream) addErrs(errs ErrorList) {
	for _, e := range errs {
		if len(st.errs) < maxErrors {
			st.errs = append(st.errs, e)
		} else {
			st.dropped++
		}
	}
}

// job is one unit of work, decoded off the reading goroutine: a JSON
// document, or a YAML chunk (which may hold a list of documents).
type job struct {
	text  *docText
	chunk *yamlChunk
	docs  []*Document
	errs  ErrorList
	n     int // documents in a chunk (or 1 for an element of a chunk's array), numbered from 1 within it
	done  chan struct{}
}

func (st *stream) work(j *job) {
	keep := func(t *docText) {
		d, anys, errs := decodeDoc(t, st.prepare != nil)
		if d != nil {
			if st.prepare != nil {
				st.prepare(d, anys)
			}
			j.docs = append(j.docs, d)
		}
		j.errs = append(j.errs, errs...)
	}
	switch {
	case j.text != nil:
		keep(j.text)
	case j.chunk != nil:
		ys := yamlSource{source: st.source, reparsed: &st.reparsed}
		ys.chunk(*j.chunk, keep, func(e ErrorList) { j.errs = append(j.errs, e...) })
		j.n = ys.index
	}
}

// run reads r and hands each document to fn in order: one goroutine
// splits the source into jobs, workers decode them, and this goroutine
// collects them in order.
func (st *stream) run(r io.Reader, f Format) error {
	br := bufio.NewReaderSize(r, 64<<10)
	isJSON := f == JSON

	workers := runtime.GOMAXPROCS(0)
	order := make(chan *job, 4*workers)
	work := make(chan *job, 2*workers)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				st.work(j)
				close(j.done)
			}
		}()
	}
	var readErr error
	go func() {
		defer close(order)
		defer close(work)
		send := func(j *job) bool {
			j.done = make(chan struct{})
			select {
			case order <- j:
			case <-quit:
				return false
			}
			if j.text == nil && j.chunk == nil {
				close(j.done)
				return true
			}
			select {
			case work <- j:
				return true
			case <-quit:
				close(j.done)
				return false
			}
		}
		bad := func(errs ErrorList) { send(&job{errs: errs}) }
		if isJSON {
			s := newJSONSplitter(st.source, br)
			s.split(func(t *docText) bool { return send(&job{text: t}) }, bad)
			readErr = s.rerr
			return
		}
		tooBig := func(line int) {
			bad(ErrorList{{Source: st.source, Line: line, Msg: fmt.Sprintf("a document larger than %d bytes", MaxDocumentBytes)}})
		}
		readErr = yamlChunks(br, func(c yamlChunk) bool {
			if start := skipSpace(c.text, 0); start < len(c.text) && c.text[start] == '[' && !nodesOnly.Load() && json.Valid(c.text) {
				// A JSON array: its documents are decoded as those of a
				// JSON source are, one job each.
				return jsonElements(st.source, c, start, func(t *docText) bool { return send(&job{text: t, n: 1}) })
			}
			if len(c.text) > MaxDocumentBytes {
				tooBig(c.line)
				return true
			}
			return send(&job{chunk: &c})
		}, tooBig)
	}()

	var fnErr error
	for j := range order {
		if fnErr != nil {
			continue // draining
		}
		<-j.done
		base := 0
		if j.chunk != nil || j.n > 0 {
			base = st.base
			st.base += j.n
		}
		for _, e := range j.errs {
			if e.Index > 0 {
				e.Index += base
			}
		}
		st.addErrs(j.errs)
		for _, d := range j.docs {
			d.Index += base
			if d.text != nil {
				d.text.loc.Index = d.Index
			}
			if err := st.fn(d); err != nil {
				fnErr = err
				close(quit)
				break
			}
		}
	}
	wg.Wait()
	if fnErr != nil {
		return fnErr
	}
	if readErr != nil {
		return &ReadError{Source: st.source, Err: readErr}
	}
	if st.dropped > 0 {
		st.errs = append(st.errs, &DocError{Source: st.source, Msg: fmt.Sprintf("and %d more problems", st.dropped)})
	}
	return nil
}

// jsonElements hands over each element of the JSON array starting at
// offset start of a chunk that is valid JSON, each numbered 1 (the
// collector numbers it after those before it), until doc returns false.
func jsonElements(source string, c yamlChunk, start int, doc func(*docText) bool) bool {
	line, col := lineCol(c.text, start)
	line += c.line - 1
	prev := start
	for _, off := range elements(c.text, start) {
		line, col = after(line, col, c.text[prev:off])
		prev = off
		js := c.text[off:skipValue(c.text, off)]
		loc := Location{Source: source, Index: 1, Line: line, Column: col} // (after those before it)
		if !doc(&docText{loc: loc, js: js, pos: jsonPositions{js: js, line: line, col: col}}) {
			return false
		}
	}
	return true
}

// Decode parses one source holding YAML documents (separated by ---), a JSON
// object or a JSON array, each document a bare resource or a wrapper
// (docs/architecture.md §4.2). It returns every document that is valid and an
// ErrorList of every one that is not; callers applying a batch must apply
// nothing when the error is non-nil.
func Decode(source string, data []byte) ([]*Document, error) {
	return decodeSet(source, data, FormatOf(source))
}

// DecodeJSON is Decode for a source known to be JSON (a request body sent
// as application/json): it must be strict JSON, as a source whose name
// ends in .json must be.
func DecodeJSON(source string, data []byte) ([]*Document, error) {
	return decodeSet(source, data, JSON)
}

func decodeSet(source string, data []byte, f Format) ([]*Document, error) {
	var (
		docs []*Document
		set  SetCheck
	)
	err := DecodeReader(source, bytes.NewReader(data), f, func(d *Document) error {
		docs = append(docs, d)
		set.Add(d)
		return nil
	})
	var errs ErrorList
	if err != nil && !errors.As(err, &errs) {
		return nil, err
	}
	errs = append(errs, set.Errs()...)
	return docs, errs.err()
}
