package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsd/xdsd/internal/store/bolt"
)

// backupClient fetches backups: a large store takes a while to copy.
var backupClient = &http.Client{Timeout: 30 * time.Minute}

func runBackup(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the running server")
	pos, err := parse(fs, args, "backup [--admin ADDR] FILE", stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want FILE: where to write the backup")
	}
	dst := pos[0]
	req, err := ac.request(http.MethodGet, "/v1/backup", nil)
	if err != nil {
		return err
	}
	c, err := ac.client(backupClient)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	format := resp.Header.Get("X-Xdsd-Backup-Format")
	// Every store's backup is a bolt store file (etcd's is exported).
	if format != "bolt" {
		return fmt.Errorf("the server sent a backup in format %q, which this xdsd cannot check", format)
	}
	// Written beside the destination, checked, then renamed into place:
	// FILE is a complete, verified backup or is not touched.
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, resp.Body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the backup: %w", err)
	}
	sent := resp.Trailer.Get("X-Xdsd-Revision")
	if sent == "" {
		return errors.New("the server did not finish the backup (see its log); nothing was written")
	}
	rev, err := bolt.Verify(tmp.Name())
	if err != nil {
		return fmt.Errorf("the backup received does not verify: %w; nothing was written", err)
	}
	if fmt.Sprint(rev) != sent {
		return fmt.Errorf("the backup holds revision %d, the server said %s; nothing was written", rev, sent)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backup of revision %d written to %s (%s, verified)\n", rev, dst, sizeText(n))
	return nil
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func runRestore(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	spec := fs.String("store", "bolt:./xdsd.db", "the store to restore into (as serve --store); the server must be stopped")
	var ef etcdFlags
	ef.register(fs)
	pos, err := parse(fs, args, "restore [--store bolt:PATH|etcd://…] [--etcd-* flags] FILE", stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want FILE: the backup to restore (from xdsd backup)")
	}
	kind, path, _ := strings.Cut(*spec, ":")
	if kind == "etcd" {
		// etcd keeps no file to replace: the backup's state is applied as
		// one batch, and the replicas serve it as a new revision.
		ctx := context.Background()
		// Damaged records do not stop it: the batch replaces them.
		st, err := openStoreFor(ctx, *spec, ef, bolt.DefaultHistory, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), true)
		if err != nil {
			return err
		}
		defer st.Close()
		rev, res, err := bolt.RestoreInto(ctx, pos[0], st)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "restored the state of revision %d into %s as revision %d: %s changed, %s deleted\n", rev, *spec, res.Rev,
			plural(len(res.Puts), "variant"), plural(len(res.Deletes), "variant"))
		return nil
	}
	if ef.set() {
		return usagef("--etcd-cert, --etcd-key, --etcd-ca, --etcd-user and --etcd-password-file are for --store etcd://…, not %q", *spec)
	}
	if kind != "bolt" || path == "" {
		return usagef("--store %q: restore takes bolt:PATH or etcd://…", *spec)
	}
	rev, kept, err := bolt.Restore(pos[0], path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored revision %d into %s", rev, path)
	if kept != "" {
		fmt.Fprintf(stdout, "; the file it replaced is kept as %s", kept)
	}
	fmt.Fprintln(stdout)
	return nil
}
