package origin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// WaitRev serves what it waited for, and once the server no longer
// follows its store it fails at once, saying why (ErrStopped), for a
// revision it has not loaded: a store closed under it or before it
// started, or the server's own Close. A store closed by its owner is no
// failure (Err).
func TestWaitRevFailsOnceStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(t *testing.T) store.Store {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "xdsd.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	t.Run("store closed while followed", func(t *testing.T) {
		st := open(t)
		srv := origin.New(st, origin.Options{Logger: quiet})
		defer srv.Close()
		srv.Start()
		res, err := st.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", "x")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.WaitRev(ctx, res.Rev); err != nil {
			t.Fatalf("revision %d, applied: %v", res.Rev, err)
		}
		st.Close()
		<-srv.Stopped()
		err = srv.WaitRev(ctx, res.Rev+1)
		if !errors.Is(err, origin.ErrStopped) || !errors.Is(err, store.ErrClosed) {
			t.Errorf("WaitRev past the closed store's revision: %v, want ErrStopped and store.ErrClosed", err)
		}
		if err := srv.WaitRev(ctx, res.Rev); err != nil {
			t.Errorf("WaitRev of a revision loaded before the store closed: %v", err)
		}
		if srv.Err() != nil {
			t.Errorf("Err after the store's owner closed it: %v, want nil", srv.Err())
		}
	})
	t.Run("store closed before", func(t *testing.T) {
		st := open(t)
		st.Close()
		srv := origin.New(st, origin.Options{Logger: quiet})
		defer srv.Close()
		srv.Start()
		if err := srv.WaitRev(ctx, 0); !errors.Is(err, origin.ErrStopped) || !errors.Is(err, store.ErrClosed) {
			t.Errorf("WaitRev on a closed store: %v, want ErrStopped and store.ErrClosed", err)
		}
	})
	t.Run("server closed", func(t *testing.T) {
		st := open(t)
		defer st.Close()
		srv := origin.New(st, origin.Options{Logger: quiet})
		srv.Start()
		if err := srv.WaitRev(ctx, 0); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if err := srv.WaitRev(ctx, 1); !errors.Is(err, origin.ErrStopped) || srv.Err() != nil {
			t.Errorf("after Close: WaitRev %v (want ErrStopped), Err %v (want nil)", err, srv.Err())
		}
	})
	t.Run("never started", func(t *testing.T) {
		st := open(t)
		defer st.Close()
		srv := origin.New(st, origin.Options{Logger: quiet})
		srv.Close()
		srv.Start() // (does nothing after Close)
		if err := srv.WaitRev(ctx, 0); !errors.Is(err, origin.ErrStopped) {
			t.Errorf("WaitRev of a server closed before it started: %v, want ErrStopped", err)
		}
	})
}
