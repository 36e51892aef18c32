package resource

import (
	"regexp"
	"strconv"
	"strings"
)

// protojson reports errors by line and column of its input. We feed it
// JSON with every value on a line of its own, so a line maps to exactly one
// field path. pathAtLine returns the path of the first key or value that
// starts on line (1-based) of js, or "" if none does. It spells out only
// that one path, so it costs time linear in the input however deep it
// nests.
func pathAtLine(js []byte, want int) string {
	type frame struct {
		array bool
		index int
		key   string
	}
	var (
		stack []frame
		line  = 1
	)
	cur := func() string {
		var b strings.Builder
		for i, f := range stack {
			if f.array {
				b.WriteString("[")
				b.WriteString(strconv.Itoa(f.index))
				b.WriteString("]")
				continue
			}
			if f.key == "" {
				continue
			}
			if i > 0 && b.Len() > 0 {
				b.WriteString(".")
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	expectKey := false
	for i := 0; i < len(js) && line <= want; i++ {
		c := js[i]
		switch c {
		case '\n':
			line++
		case ' ', '\t', '\r', ':':
		case '{':
			if line == want {
				return cur()
			}
			stack = append(stack, frame{})
			expectKey = true
		case '[':
			if line == want {
				return cur()
			}
			stack = append(stack, frame{array: true})
			expectKey = false
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].array {
					stack[n-1].index++
				} else {
					expectKey = true
				}
			}
		case '"':
			j := i + 1
			for j < len(js) && js[j] != '"' {
				if js[j] == '\\' {
					j++
				}
				j++
			}
			if expectKey && len(stack) > 0 {
				k, err := strconv.Unquote(string(js[i : j+1]))
				if err != nil {
					k = string(js[i+1 : j])
				}
				stack[len(stack)-1].key = k
				expectKey = false
			}
			if line == want {
				return cur()
			}
			i = j
		default:
			if line == want {
				return cur()
			}
			for i+1 < len(js) && !strings.ContainsRune(",]}\n \t\r", rune(js[i+1])) {
				i++
			}
		}
	}
	return ""
}

// lineEach puts every key and array element of the compact JSON js on a
// line of its own, for pathAtLine. Unlike json.Indent it writes no
// indentation, which would grow with the square of the nesting depth.
func lineEach(js []byte) []byte {
	out := make([]byte, 0, len(js)+len(js)/8)
	inString := false
	for i := 0; i < len(js); i++ {
		c := js[i]
		out = append(out, c)
		switch {
		case inString && c == '\\' && i+1 < len(js):
			i++
			out = append(out, js[i])
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '[' || c == ','):
			out = append(out, '\n')
		}
	}
	return out
}

var lineColRE = regexp.MustCompile(`\(line (\d+):(\d+)\): (.*)$`)

// protojsonErrorPath splits a protojson error into the field path it points
// at (using pathAtLine of the input js) and the message without its
// position.
func protojsonErrorPath(err error, js []byte) (path, msg string) {
	s := trimProto(err.Error())
	m := lineColRE.FindStringSubmatchIndex(s)
	if m == nil {
		return "", s
	}
	line, _ := strconv.Atoi(s[m[2]:m[3]])
	msg = trimProto(strings.TrimSpace(s[:m[0]] + s[m[6]:m[7]]))
	if line > 0 {
		path = pathAtLine(js, line)
	}
	return path, msg
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

// trimProto drops protobuf-go's "proto:" prefix, whose following space is
// deliberately sometimes U+00A0 (to stop callers matching error strings).
func trimProto(s string) string {
	if t, ok := strings.CutPrefix(s, "proto:"); ok {
		return strings.TrimLeft(t, " \u00a0")
	}
	return s
}
