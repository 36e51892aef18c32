package protocol

import (
	"fmt"
	"testing"
)

// TestRecentRing: a delta type state remembers the last maxRecent
// responses, newest first, however many were sent.
func TestRecentRing(t *testing.T) {
	for _, sentN := range []int{1, maxRecent - 1, maxRecent, maxRecent + 1, 3*maxRecent + 5} {
		ts := &typeState{}
		for i := range sentN {
			ts.remember(sent{nonce: fmt.Sprint(i)})
		}
		want := min(sentN, maxRecent)
		if len(ts.recent) != want {
			t.Fatalf("%d sent: %d remembered, want %d", sentN, len(ts.recent), want)
		}
		for k := range want {
			if got, w := ts.newest(k).nonce, fmt.Sprint(sentN-1-k); got != w {
				t.Fatalf("%d sent: newest(%d) = %s, want %s", sentN, k, got, w)
			}
		}
	}
}
