package bolt_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// contents reads a store's whole state: key → version and payload.
func contents(t *testing.T, s *bolt.Store) (map[resource.Key]string, error) {
	t.Helper()
	cs, err := s.Changes(context.Background(), store.FromStart)
	if err != nil {
		return nil, err
	}
	out := map[resource.Key]string{}
	for _, v := range cs.Puts {
		out[v.Key()] = v.Version + " " + string(v.Body())
	}
	return out, nil
}

// A damaged store file is refused with an error naming it, or read back
// exactly as written — never a crash (panic, SIGSEGV) and never altered
// data served: truncated files, overwritten pages, flipped bytes, an empty
// file, a file that is not a store.
func TestDamagedStoreIsRefusedNeverServedAltered(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	s, err := bolt.Open(good, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for batch := range 4 {
		var b store.Batch
		for i := range 100 {
			b.Puts = append(b.Puts, storetest.Cluster(fmt.Sprintf("cluster-%d-%d", batch, i), "", fmt.Sprint("tag", batch)))
		}
		b.Puts = append(b.Puts, storetest.Route("r", "env=prod", fmt.Sprint("p", batch)), storetest.Route("r", "env=test", fmt.Sprint("t", batch)))
		if _, err := s.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	want, err := contents(t, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Damage comes in blocks of 4 KiB, whatever the file's page size.
	const page = 4096
	// The pages in use: bbolt grows the file ahead of its data, and
	// damage past the data is harmless. Every page when there are few,
	// else a sample (each case copies the whole file).
	pages := len(orig) / page
	var damaged []int
	for p := 0; p < pages && len(damaged) < 48; p++ {
		if !allZero(orig[p*page : (p+1)*page]) {
			damaged = append(damaged, p)
		}
	}

	type damage struct {
		name string
		fn   func(b []byte) []byte
	}
	var cases []damage
	cases = append(cases,
		damage{"empty file", func([]byte) []byte { return nil }},
		damage{"not a store", func([]byte) []byte { return []byte(strings.Repeat("hello, not a bolt file\n", 1000)) }},
		damage{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
		damage{"truncated mid-page", func(b []byte) []byte { return b[:len(b)-page-100] }},
		// The newer meta page damaged, with the page size it records:
		// bbolt would open at the other, a transaction back.
		damage{"meta page 0 overwritten", func(b []byte) []byte { clear(b[:64]); return b }},
		damage{"meta page 1 overwritten", func(b []byte) []byte {
			ps := binary.LittleEndian.Uint32(b[16+8:])
			clear(b[ps : ps+64])
			return b
		}},
	)
	for _, p := range damaged {
		cases = append(cases, damage{fmt.Sprintf("page %d overwritten", p), func(b []byte) []byte {
			r := rand.New(rand.NewPCG(uint64(p), 7))
			for i := p * page; i < (p+1)*page && i < len(b); i++ {
				b[i] = byte(r.UintN(256))
			}
			return b
		}})
	}
	for seed := range 30 {
		cases = append(cases, damage{fmt.Sprintf("50 bytes flipped (seed %d)", seed), func(b []byte) []byte {
			r := rand.New(rand.NewPCG(uint64(seed), 11))
			for range 50 {
				b[r.IntN(len(b))] ^= byte(1 + r.UintN(255))
			}
			return b
		}})
	}
	refused, intact := 0, 0
	for i, c := range cases {
		path := filepath.Join(dir, fmt.Sprintf("damaged-%d.db", i))
		if err := os.WriteFile(path, c.fn(append([]byte(nil), orig...)), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := bolt.Open(path, bolt.Options{})
		os.Remove(path) // (open or not: each case's copy is large)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%s: the error does not name the file: %v", c.name, err)
			}
			refused++
			continue
		}
		got, err := contents(t, s)
		s.Close()
		if err != nil {
			refused++
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: opened and read %d variants, want %d (or an error)", c.name, len(got), len(want))
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s read back altered (or missing)", c.name, k)
				break
			}
		}
		intact++
	}
	t.Logf("%d damaged files: %d refused, %d read back intact (the damage fell on unused bytes)", len(cases), refused, intact)
	if refused == 0 {
		t.Error("no damage was detected")
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
