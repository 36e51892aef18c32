package resource

import (
	"math/rand/v2"
	"testing"
)

// chars counts as the byte-by-byte loop it replaced, on text of every
// length and mix: ASCII, multi-byte characters, and bytes that are not
// UTF-8.
func TestCharsCountsEachCharacter(t *testing.T) {
	slow := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c&0xC0 != 0x80 {
				n++
			}
		}
		return n
	}
	r := rand.New(rand.NewPCG(1, 2))
	pieces := [][]byte{[]byte("a"), []byte("é"), []byte("漢"), []byte("😀"), {0x80}, {0xbf}, {0xc0}, {0xff}, []byte("\n"), []byte(`"`)}
	for range 2000 {
		var b []byte
		for range r.IntN(40) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		for i := 0; i <= len(b); i++ {
			if got, want := chars(b[i:]), slow(b[i:]); got != want {
				t.Fatalf("chars(%q) = %d, want %d", b[i:], got, want)
			}
		}
	}
}
