package resource

import (
	"fmt"
	"strconv"
	"strings"
)

// DocError is a problem with one authored document. It says where: the
// source (a file name, or "-" for standard input), the 1-based index of the
// document in that source, the line and column in the source of what is
// wrong (the offending field's own when it is known, else where the
// document starts), and the field path inside the document.
type DocError struct {
	Source string
	Index  int    // 1-based; 0 when the error concerns the whole source
	Line   int    // 1-based; 0 if unknown
	Column int    // 1-based, in characters; 0 if unknown
	Path   string // e.g. resource.virtual_hosts[0].domains; "" for the whole document
	Msg    string
}

// Error reads like a compiler's message, so that editors and terminals
// can jump to it: "f.yaml:12:7: document 2: resource.name: ...".
func (e *DocError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	writePos(&b, e.Line, e.Column)
	if e.Index > 0 {
		fmt.Fprintf(&b, ": document %d", e.Index)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func writePos(b *strings.Builder, line, col int) {
	if line <= 0 {
		return
	}
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(line))
	if col > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(col))
	}
}

// Location is where a document starts.
type Location struct {
	Source string
	Index  int // 1-based document index in the source
	Line   int // 1-based; 0 if unknown
	Column int // 1-based; 0 if unknown
}

// String names the document: "f.yaml:12 (document 2)".
func (l Location) String() string {
	if l.Source == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(l.Source)
	writePos(&b, l.Line, 0)
	if l.Index > 0 {
		fmt.Fprintf(&b, " (document %d)", l.Index)
	}
	return b.String()
}

// errorf is an error about the whole document, placed at its start.
func (l Location) errorf(path, format string, args ...any) *DocError {
	return &DocError{Source: l.Source, Index: l.Index, Line: l.Line, Column: l.Column, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// ErrorList is every problem found in a set of documents. It is what Decode
// (and files.Load) return, so that a user sees all bad documents at once.
type ErrorList []*DocError

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find each DocError.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
