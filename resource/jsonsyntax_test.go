package resource

import "testing"

// TestEndsEarly: a truncated value is told from one with an offending
// byte by encoding/json's Decoder, not by Unmarshal's message.
func TestEndsEarly(t *testing.T) {
	for js, want := range map[string]bool{
		`{"a":`:        true,
		`{"a": [1, 2`:  true,
		`{"a": "xy`:    true,
		`   `:          true,
		`{"a": 1}}`:    false,
		`{"a" 1}`:      false,
		`{"a": 1} x`:   false,
		`{"a": tru}`:   false,
		`[1, 2,]`:      false,
		`{"a": 1,}   `: false,
	} {
		if got := endsEarly([]byte(js)); got != want {
			t.Errorf("endsEarly(%q) = %v, want %v", js, got, want)
		}
	}
	// Placed just past the last byte when it ends early, at the
	// offending byte otherwise.
	e := jsonSyntaxError("f.json", 1, []byte("{\"a\": [1,\n  2  \n"), 1, 1)
	if e.Line != 2 || e.Column != 4 {
		t.Errorf("truncated: at %d:%d, want 2:4 (%v)", e.Line, e.Column, e)
	}
	e = jsonSyntaxError("f.json", 1, []byte("{\"a\": 1}}"), 1, 1)
	if e.Line != 1 || e.Column != 9 {
		t.Errorf("extra brace: at %d:%d, want 1:9 (%v)", e.Line, e.Column, e)
	}
}
