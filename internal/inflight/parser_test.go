package inflight

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2"
)

// wire builds what a client sends: the preface, then frames written by
// x/net/http2's Framer.
type wire struct {
	t   testing.TB
	buf bytes.Buffer
	fr  *http2.Framer
}

func newWire(t testing.TB) *wire {
	w := &wire{t: t}
	w.buf.WriteString(http2.ClientPreface)
	w.fr = http2.NewFramer(&w.buf, nil)
	w.fr.AllowIllegalWrites = true // frames of any size, data of any stream
	if err := w.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *wire) check(err error) *wire {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	return w
}

// headers opens stream id (or, with end, opens and ends it), a block
// fragment of arbitrary bytes, continued in a CONTINUATION frame.
func (w *wire) headers(id uint32, end bool) *wire {
	w.check(w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: prefix(9, 'h'), EndStream: end}))
	return w.check(w.fr.WriteContinuation(id, true, prefix(7, 'c')))
}

func (w *wire) data(id uint32, end bool, d ...[]byte) *wire {
	return w.check(w.fr.WriteData(id, end, bytes.Join(d, nil)))
}

func (w *wire) padded(id uint32, end bool, pad int, d ...[]byte) *wire {
	// The padding looks like a gRPC prefix announcing 1 MiB: it must not
	// be read as one.
	return w.check(w.fr.WriteDataPadded(id, end, bytes.Join(d, nil), prefix(1<<20, 0)[:pad]))
}

func (w *wire) rst(id uint32) *wire { return w.check(w.fr.WriteRSTStream(id, http2.ErrCodeCancel)) }

// ping and window updates between the data: frames of stream 0.
func (w *wire) other() *wire {
	w.check(w.fr.WritePing(false, [8]byte{0, 0, 0, 0, 4, 0, 0, 0}))
	return w.check(w.fr.WriteWindowUpdate(0, 1<<20))
}

// prefix is a gRPC message's 5-byte prefix announcing n bytes, followed by
// n bytes of fill (fill 0: the prefix alone, then n zero bytes).
func prefix(n int, fill byte) []byte {
	b := make([]byte, 5+n)
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
	for i := 5; i < len(b); i++ {
		b[i] = fill
	}
	return b
}

// grpcMsg is a whole gRPC message of n bytes.
func grpcMsg(n int) []byte { return prefix(n, 'm') }

// feedSplit feeds b to p in pieces cut by cut, returning what the first
// refusal said (0: none).
func feedSplit(p *parser, b []byte, cut func(left int) int) int64 {
	for len(b) > 0 {
		k := min(max(cut(len(b)), 1), len(b))
		if over := p.feed(b[:k]); over > 0 {
			return over
		}
		b = b[k:]
	}
	return 0
}

// splits are the ways a connection's bytes arrive in the test: whole, a
// byte at a time (so every frame header, prefix and pad length is split),
// small odd pieces, and random ones.
func splits(seed uint64) map[string]func(int) int {
	r := rand.New(rand.NewPCG(seed, 1))
	return map[string]func(int) int{
		"whole":  func(n int) int { return n },
		"bytes":  func(int) int { return 1 },
		"3":      func(int) int { return 3 },
		"10":     func(int) int { return 10 },
		"random": func(int) int { return 1 + r.IntN(40) },
	}
}

func TestParserCounts(t *testing.T) {
	const rec = recordCost
	cases := []struct {
		name  string
		build func(w *wire) *wire
		held  int64 // what the connection holds after all of it
		live  int   // streams with a message being read
	}{
		{"one message spanning three DATA frames, not finished", func(w *wire) *wire {
			m := grpcMsg(100)
			return w.headers(1, false).data(1, false, m[:3]).other().data(1, false, m[3:50]).data(1, false, m[50:90])
		}, 85 + rec, 1},
		{"one message spanning three DATA frames, finished", func(w *wire) *wire {
			m := grpcMsg(100)
			return w.headers(1, false).data(1, false, m[:3]).data(1, false, m[3:50]).data(1, false, m[50:])
		}, 0, 0},
		{"several messages in one frame, the last begun", func(w *wire) *wire {
			return w.headers(1, false).data(1, false, grpcMsg(10), grpcMsg(0), grpcMsg(20), grpcMsg(30)[:17])
		}, 12 + rec, 1},
		{"a prefix split across frames", func(w *wire) *wire {
			m := grpcMsg(40)
			return w.headers(1, false).data(1, false, m[:2]).data(1, false, m[2:4]).data(1, false, m[4:9])
		}, 4 + rec, 1},
		{"padding is not data", func(w *wire) *wire {
			m := grpcMsg(30)
			return w.headers(1, false).padded(1, false, 7, m[:10]).padded(1, false, 0, m[10:20]).padded(1, false, 255, m[20:])
		}, 0, 0},
		{"padded, not finished", func(w *wire) *wire {
			return w.headers(3, false).padded(3, false, 9, grpcMsg(64)[:20])
		}, 15 + rec, 1},
		{"padding alone", func(w *wire) *wire {
			return w.headers(3, false).padded(3, false, 9).data(3, false, grpcMsg(8)[:6])
		}, 1 + rec, 1},
		{"END_STREAM on DATA ends the stream", func(w *wire) *wire {
			return w.headers(1, false).data(1, true, grpcMsg(100)[:60])
		}, 0, 0},
		{"RST_STREAM ends the stream", func(w *wire) *wire {
			return w.headers(1, false).data(1, false, grpcMsg(100)[:60]).data(3, false, grpcMsg(50)[:30]).rst(1)
		}, 25 + rec, 1},
		{"END_STREAM on HEADERS (trailers) ends the stream", func(w *wire) *wire {
			return w.headers(1, false).data(1, false, grpcMsg(100)[:60]).headers(1, true)
		}, 0, 0},
		{"streams interleaved", func(w *wire) *wire {
			a, b := grpcMsg(1000), grpcMsg(500)
			return w.headers(1, false).headers(3, false).data(1, false, a[:300]).data(3, false, b[:200]).
				data(1, false, a[300:]).data(3, false, b[200:400]).headers(5, true)
		}, 395 + rec, 1},
		{"an empty DATA frame and an empty message", func(w *wire) *wire {
			return w.headers(1, false).data(1, false).data(1, false, grpcMsg(0)).data(1, false, grpcMsg(3)[:1])
		}, rec, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.build(newWire(t)).buf.Bytes()
			for how, cut := range splits(uint64(len(b))) {
				p := newParser(1 << 20)
				if over := feedSplit(p, b, cut); over != 0 {
					t.Fatalf("%s: refused at %d", how, over)
				}
				if p.held != c.held || len(p.streams) != c.live {
					t.Errorf("%s: holds %d bytes in %d streams, want %d in %d", how, p.held, len(p.streams), c.held, c.live)
				}
			}
		})
	}
}

func TestParserLimit(t *testing.T) {
	const limit = 1000
	cases := []struct {
		name    string
		build   func(w *wire) *wire
		refused bool
	}{
		{"one message of the limit, whole", func(w *wire) *wire {
			return w.headers(1, false).data(1, false, grpcMsg(limit))
		}, false},
		{"one message of the limit, all but a byte", func(w *wire) *wire {
			return w.headers(1, false).data(1, false, grpcMsg(limit)[:limit+4])
		}, false},
		{"one message over the limit", func(w *wire) *wire {
			return w.headers(1, false).data(1, false, grpcMsg(limit+1))
		}, true},
		{"messages one after another, many times the limit", func(w *wire) *wire {
			w.headers(1, false)
			for range 20 {
				w.data(1, false, grpcMsg(600))
			}
			return w
		}, false},
		{"two streams' unfinished messages together over it", func(w *wire) *wire {
			return w.headers(1, false).headers(3, false).data(1, false, grpcMsg(800)[:505]).data(3, false, grpcMsg(800)[:505])
		}, true},
		{"two streams, the first reset in time", func(w *wire) *wire {
			return w.headers(1, false).headers(3, false).data(1, false, grpcMsg(800)[:505]).rst(1).data(3, false, grpcMsg(800)[:505])
		}, false},
		{"many streams of one prefix byte each: their records count", func(w *wire) *wire {
			for id := uint32(1); id < 2*40; id += 2 {
				w.data(id, false, []byte{0})
			}
			return w
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.build(newWire(t)).buf.Bytes()
			for how, cut := range splits(uint64(len(b))) {
				over := feedSplit(newParser(limit), b, cut)
				if (over > 0) != c.refused {
					t.Errorf("%s: refused at %d bytes, want refused %v", how, over, c.refused)
				}
				if over > 0 && over <= limit {
					t.Errorf("%s: refused at %d bytes, within the limit", how, over)
				}
			}
		})
	}
}

// FuzzParser feeds arbitrary bytes cut at arbitrary places: the parser
// never panics, never counts less than nothing, and refuses or not
// whatever the cuts.
func FuzzParser(f *testing.F) {
	w := newWire(f)
	m := grpcMsg(70)
	w.headers(1, false).data(1, false, m[:30]).padded(1, false, 4, m[30:]).headers(3, false).data(3, false, grpcMsg(9), grpcMsg(20)[:8]).rst(3)
	f.Add(w.buf.Bytes(), uint64(1))
	f.Add(w.buf.Bytes()[24:], uint64(7))
	f.Add([]byte(http2.ClientPreface+"\x00\x00\x05\x00\x08\x00\x00\x00\x01\x04\x00\x00\x00\x00"), uint64(3))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		whole := newParser(512)
		want := whole.feed(b)
		r := rand.New(rand.NewPCG(seed, 2))
		p := newParser(512)
		got := feedSplit(p, b, func(int) int { return 1 + r.IntN(16) })
		if (got > 0) != (want > 0) {
			t.Fatalf("cut: refused at %d, whole: %d (0: not refused)", got, want)
		}
		if want == 0 && (p.held != whole.held || len(p.streams) != len(whole.streams)) {
			t.Fatalf("cut: holds %d in %d streams, whole: %d in %d", p.held, len(p.streams), whole.held, len(whole.streams))
		}
		if p.held < 0 || p.held > p.max {
			t.Fatalf("holds %d, limit %d", p.held, p.max)
		}
	})
}

// BenchmarkParserFeed is the parser's cost on the read path: a
// connection's bytes of DATA frames carrying 100 KiB messages on four
// streams, fed in 32 KiB reads (gRPC's read buffer).
func BenchmarkParserFeed(b *testing.B) {
	w := newWire(b)
	m := grpcMsg(100 << 10)
	for range 16 {
		for id := uint32(1); id <= 7; id += 2 {
			for d := m; len(d) > 0; d = d[min(len(d), 16384):] {
				w.data(id, false, d[:min(len(d), 16384)])
			}
		}
	}
	wire := w.buf.Bytes()[len(http2.ClientPreface):]
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	p := newParser(1 << 30)
	p.preface = 0
	for b.Loop() {
		for d := wire; len(d) > 0; d = d[min(len(d), 32<<10):] {
			if p.feed(d[:min(len(d), 32<<10)]) > 0 {
				b.Fatal("refused")
			}
		}
	}
}

// serverFrames is what a server writes: trailers ending stream id, or
// RST_STREAM, among other frames.
func serverFrames(t testing.TB, rst bool, ids ...uint32) []byte {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()
	for _, id := range ids {
		fr.WriteData(id, false, grpcMsg(40))
		if rst {
			fr.WriteRSTStream(id, http2.ErrCodeNo)
		} else {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte("trailers"), EndHeaders: true, EndStream: true})
		}
	}
	fr.WritePing(false, [8]byte{})
	return b.Bytes()
}

// A stream the server ends (trailers, or RST_STREAM) stops counting: its
// message is forgotten, and what the client still sends on it (gRPC drops
// it) is not counted; the server's writes are followed however they are
// cut.
func TestParserServerEnds(t *testing.T) {
	for _, rst := range []bool{false, true} {
		w := newWire(t)
		w.headers(1, false).headers(3, false).data(1, false, grpcMsg(1000)[:600]).data(3, false, grpcMsg(100)[:50])
		before := w.buf.Bytes()
		written := serverFrames(t, rst, 1)
		w2 := newWire(t)
		w2.buf.Reset()
		w2.data(1, false, grpcMsg(1000)[600:900]).data(3, false, grpcMsg(100)[50:80])
		after := w2.buf.Bytes()
		for how, cut := range splits(uint64(len(written))) {
			var e ends
			p := newParser(1 << 20)
			p.ends = &e
			feedSplit(p, before, cut)
			if p.held != 595+45+2*recordCost {
				t.Fatalf("rst %v, %s: holds %d before the server ends stream 1", rst, how, p.held)
			}
			for b := written; len(b) > 0; {
				k := min(max(cut(len(b)), 1), len(b))
				e.feed(b[:k])
				b = b[k:]
			}
			feedSplit(p, after, cut)
			if p.held != 75+recordCost || len(p.streams) != 1 {
				t.Errorf("rst %v, %s: holds %d in %d streams after the server ended stream 1, want %d in 1", rst, how, p.held, len(p.streams), 75+recordCost)
			}
		}
	}
}

// Past maxEnded server-ended streams, the oldest is forgotten: data on it
// counts again (the strict way to err).
func TestParserEndedRemembered(t *testing.T) {
	var e ends
	p := newParser(1 << 20)
	p.ends = &e
	p.preface = 0
	ids := make([]uint32, maxEnded+1)
	for i := range ids {
		ids[i] = uint32(2*i + 1)
	}
	e.feed(serverFrames(t, true, ids...))
	w := newWire(t)
	w.buf.Reset()
	w.data(ids[0], false, grpcMsg(100)[:50]).data(ids[1], false, grpcMsg(100)[:50])
	p.feed(w.buf.Bytes())
	if p.held != 45+recordCost || len(p.ended) != maxEnded {
		t.Errorf("holds %d, remembers %d ended streams; want %d and %d", p.held, len(p.ended), 45+recordCost, maxEnded)
	}
}

// BenchmarkEndsFeed is what following the server's writes costs: 100
// streams' responses of 16 KiB DATA frames and their trailers, in 32 KiB
// writes.
func BenchmarkEndsFeed(b *testing.B) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	d := make([]byte, 16384)
	for id := uint32(1); id < 200; id += 2 {
		for range 4 {
			fr.WriteData(id, false, d)
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte("trailers"), EndHeaders: true, EndStream: true})
	}
	written := buf.Bytes()
	b.SetBytes(int64(len(written)))
	b.ReportAllocs()
	var e ends
	var taken []uint32
	for b.Loop() {
		for w := written; len(w) > 0; w = w[min(len(w), 32<<10):] {
			e.feed(w[:min(len(w), 32<<10)])
		}
		taken = e.take(taken)
	}
}
