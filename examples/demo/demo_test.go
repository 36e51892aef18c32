package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The demo's four grpc-go xDS clients, differing only in node metadata,
// reach four different backends: one per TP2 variant of route "tp2".
func TestDemoReachesFourBackends(t *testing.T) {
	rows, err := run(context.Background(), defaultExamples(), time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(rows, "\n"))
	}
	seen := map[string]bool{}
	for i, c := range clients {
		if !strings.HasSuffix(rows[i], "→ "+c.want) {
			t.Errorf("row %q, want → %s", rows[i], c.want)
		}
		seen[c.want] = true
	}
	if len(seen) != 4 {
		t.Errorf("backends reached: %v, want four different ones", seen)
	}
}
