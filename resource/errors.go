package resource

import (
	"fmt"
	"strings"
)

// DocError is a problem with one authored document. It says where: the
// source (a file name, or "-" for standard input), the 1-based index of the
// document in that source, the line the document starts on, and the field
// path inside the document.
type DocError struct {
	Source string
	Index  int    // 1-based; 0 when the error concerns the whole source
	Line   int    // first line of the document; 0 if unknown
	Path   string // e.g. resource.virtual_hosts[0].domains; "" for the whole document
	Msg    string
}

func (e *DocError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Index > 0 {
		fmt.Fprintf(&b, ": document %d", e.Index)
		if e.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", e.Line)
		}
	} else if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Where names the document, for messages that point at it from elsewhere.
func (e *DocError) Where() string {
	return Location{Source: e.Source, Index: e.Index, Line: e.Line}.String()
}

// Location is where a document came from.
type Location struct {
	Source string
	Index  int
	Line   int
}

func (l Location) String() string {
	if l.Source == "" {
		return ""
	}
	s := l.Source
	if l.Index > 0 {
		s += fmt.Sprintf(" document %d", l.Index)
	}
	if l.Line > 0 {
		s += fmt.Sprintf(" (line %d)", l.Line)
	}
	return s
}

func (l Location) errorf(path, format string, args ...any) *DocError {
	return &DocError{Source: l.Source, Index: l.Index, Line: l.Line, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// ErrorList is every problem found in a set of documents. It is what Decode
// and Load return, so that a user sees all bad documents at once.
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
