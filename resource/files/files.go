package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/xdsd/xdsd/resource"
)

// Walk reads the documents of a file, of every *.yaml, *.yml and *.json
// file under a directory (in lexical order, skipping hidden entries), or
// of standard input when path is "-", calling fn with each valid one as
// resource.DecodeReader does. It reports every problem of every file, and stops
// only at fn's error.
func Walk(path string, fn func(*resource.Document) error) error {
	if path == "-" {
		return resource.DecodeReader("-", os.Stdin, resource.Auto, fn)
	}
	files, err := List(path)
	if err != nil {
		return resource.ErrorList{{Source: path, Msg: err.Error()}}
	}
	var errs resource.ErrorList
	for _, f := range files {
		open := Open
		if f == path {
			// Named by the user, it is read whatever it is: a pipe
			// such as bash's <(...) too.
			open = func(p string) (*os.File, error) { return os.Open(p) }
		}
		file, err := open(f)
		if err != nil {
			errs = append(errs, &resource.DocError{Source: f, Msg: err.Error()})
			continue
		}
		err = resource.DecodeReader(f, file, resource.FormatOf(f), fn)
		file.Close()
		var (
			l  resource.ErrorList
			re *resource.ReadError
		)
		switch {
		case errors.As(err, &l):
			errs = append(errs, l...)
		case errors.As(err, &re):
			errs = append(errs, &resource.DocError{Source: f, Msg: re.Err.Error()})
		case err != nil:
			return err // fn's
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// Load reads documents as Walk does and returns them all. All problems in
// all files are reported together, each once: the set checks (resource.SetCheck)
// run once over all the files, not per file and again for the whole.
func Load(path string) ([]*resource.Document, error) {
	var (
		docs []*resource.Document
		set  resource.SetCheck
	)
	err := Walk(path, func(d *resource.Document) error {
		docs = append(docs, d)
		set.Add(d)
		return nil
	})
	var errs resource.ErrorList
	if err != nil && !errors.As(err, &errs) {
		return nil, err
	}
	errs = append(errs, set.Errs()...)
	if len(errs) > 0 {
		return nil, errs
	}
	return docs, nil
}

// ErrNotRegular is returned by Open for a file that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens an authoring file found in a directory. Only a regular
// file (or a symbolic link to one) is opened: a FIFO named *.yaml would
// block the reader forever, and a device could be endless. Anything else is
// an error wrapping ErrNotRegular rather than skipped, since the resources
// the author meant it to hold would silently go missing (and, under
// --watch, be deleted).
func Open(path string) (*os.File, error) {
	// Non-blocking, so that opening a FIFO does not wait for a writer;
	// the type is checked on what was opened, so a file swapped in
	// between cannot slip through.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w (%s): only regular files in a directory are read", ErrNotRegular, fileKind(st.Mode()))
	}
	return f, nil
}

// Read reads an authoring file found in a directory, as Open opens it.
func Read(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
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

// List lists the authoring files Walk reads for path.
func List(path string) ([]string, error) {
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
		if !d.IsDir() && IsSource(p) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// IsSource reports whether a file name has an authoring extension.
func IsSource(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
