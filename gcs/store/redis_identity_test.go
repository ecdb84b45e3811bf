package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
)

func put(t *testing.T, s store.Store, key string) error {
	t.Helper()
	return s.Put(t.Context(), store.TableNodes, key, []byte("v"))
}

// Redis restarted without its append-only file comes back empty: the next write finds
// no store identity, is reported failed, and every call after it fails with
// ErrStoreLost, instead of the GCS serving an empty table as if nothing happened.
func TestRedisThatCameBackEmptyLosesTheStore(t *testing.T) {
	dir := t.TempDir()
	server := redisserver.StartWithOptions(t, redisserver.Options{Dir: dir})
	s := newRedisStore(t, server.Addr, "raygo")
	if err := put(t, s, "n1"); err != nil {
		t.Fatal(err)
	}
	server.Kill()
	if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	server.Restart()

	if err := put(t, s, "n2"); !errors.Is(err, store.ErrStoreLost) {
		t.Fatalf("write to a Redis that came back empty: %v, want ErrStoreLost", err)
	}
	select {
	case <-s.Lost():
	default:
		t.Fatal("Lost() not closed")
	}
	if _, _, err := s.Get(t.Context(), store.TableNodes, "n1"); !errors.Is(err, store.ErrStoreLost) {
		t.Fatalf("a read after the loss: %v, want ErrStoreLost", err)
	}
	// A new client (a restarted GCS) sees a new, empty store with an identity of its own.
	fresh := newRedisStore(t, server.Addr, "raygo")
	if fresh.Identity() == s.Identity() || fresh.Identity() == "" {
		t.Fatalf("identities %q and %q", fresh.Identity(), s.Identity())
	}
}

// Redis restarted from an older append-only file rolled back: the write sequence goes
// backwards, and the store is lost.
func TestRedisThatRolledBackLosesTheStore(t *testing.T) {
	dir := t.TempDir()
	server := redisserver.StartWithOptions(t, redisserver.Options{Dir: dir})
	s := newRedisStore(t, server.Addr, "raygo")
	if err := put(t, s, "n1"); err != nil {
		t.Fatal(err)
	}
	server.Stop()
	old := filepath.Join(t.TempDir(), "aof")
	if err := os.CopyFS(old, os.DirFS(filepath.Join(dir, "appendonlydir"))); err != nil {
		t.Fatal(err)
	}
	server.Restart()
	for _, key := range []string{"n2", "n3", "n4"} {
		if err := put(t, s, key); err != nil {
			t.Fatal(err)
		}
	}
	server.Stop()
	if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "appendonlydir"), os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	server.Restart()

	if err := put(t, s, "n5"); !errors.Is(err, store.ErrStoreLost) {
		t.Fatalf("write to a Redis that rolled back: %v, want ErrStoreLost", err)
	}
}

// A restart that kept everything (the append-only file) changes nothing.
func TestRedisRestartedWithItsDataKeepsTheStore(t *testing.T) {
	server := redisserver.Start(t)
	s := newRedisStore(t, server.Addr, "raygo")
	for range 3 {
		if err := put(t, s, "n"); err != nil {
			t.Fatal(err)
		}
		server.Kill()
		server.Restart()
	}
	if err := put(t, s, "n"); err != nil {
		t.Fatalf("after restarts with the append-only file: %v", err)
	}
}

// openWithIdentityFile is a GCS (re)starting with --store-identity-file.
func openWithIdentityFile(address, file string) (*store.Redis, error) {
	cfg := store.DefaultRedisConfig()
	cfg.Address, cfg.Namespace, cfg.IdentityFile = address, "raygo", file
	return store.NewRedis(context.Background(), cfg)
}

// saveAOF copies the server's append-only files aside; restoreAOF puts them back (the
// server stopped), as an operator restoring an older backup would.
func saveAOF(t *testing.T, dir string) string {
	t.Helper()
	saved := filepath.Join(t.TempDir(), "aof")
	if err := os.CopyFS(saved, os.DirFS(filepath.Join(dir, "appendonlydir"))); err != nil {
		t.Fatal(err)
	}
	return saved
}

func restoreAOF(t *testing.T, dir, saved string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "appendonlydir"), os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
}

// A GCS that restarts finds Redis rolled back to older data while it was down: the
// identity file holds the last write it acknowledged, Redis's sequence is below it, and
// the new GCS refuses the store instead of serving the older table. With the data kept,
// the same restart goes on.
func TestRestartedStoreRefusesARedisRolledBackWhileItWasDown(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "redis-store-identity")
	server := redisserver.StartWithOptions(t, redisserver.Options{Dir: dir})
	first, err := openWithIdentityFile(server.Addr, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(t, first, "n1"); err != nil {
		t.Fatal(err)
	}
	server.Stop()
	saved := saveAOF(t, dir)
	server.Restart()
	for _, key := range []string{"n2", "n3"} {
		if err := put(t, first, key); err != nil {
			t.Fatal(err)
		}
	}
	_ = first.Close() // the GCS dies

	// Restarted on the same data: the store goes on.
	again, err := openWithIdentityFile(server.Addr, file)
	if err != nil {
		t.Fatalf("restart on the same data: %v", err)
	}
	if err := put(t, again, "n4"); err != nil {
		t.Fatal(err)
	}
	_ = again.Close()

	// Redis restored from the older files while the GCS was down.
	server.Stop()
	restoreAOF(t, dir, saved)
	server.Restart()
	if _, err := openWithIdentityFile(server.Addr, file); !errors.Is(err, store.ErrStoreLost) || !strings.Contains(err.Error(), "older data") {
		t.Fatalf("restart on a rolled-back Redis: %v, want ErrStoreLost naming older data", err)
	}
}

// The identity file of an older version holds the UUID alone; an empty or garbled one
// stops the start, naming the file.
func TestIdentityFileFormats(t *testing.T) {
	server := redisserver.Start(t)
	file := filepath.Join(t.TempDir(), "id")
	s, err := openWithIdentityFile(server.Addr, file)
	if err != nil {
		t.Fatal(err)
	}
	uuid := s.Identity()
	_ = s.Close()
	if err := os.WriteFile(file, []byte(uuid+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = openWithIdentityFile(server.Addr, file)
	if err != nil {
		t.Fatalf("UUID-only file: %v", err)
	}
	_ = s.Close()
	for _, content := range []string{"", uuid + " minus-one\n"} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openWithIdentityFile(server.Addr, file); !errors.Is(err, store.ErrIdentityFile) || !strings.Contains(err.Error(), file) {
			t.Fatalf("file %q: %v, want ErrIdentityFile naming %s", content, err, file)
		}
	}
	// Another store's UUID: the Redis this cluster used was replaced.
	if err := os.WriteFile(file, []byte("0123456789abcdef0123456789abcdef 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openWithIdentityFile(server.Addr, file); !errors.Is(err, store.ErrStoreLost) {
		t.Fatalf("another store's UUID: %v, want ErrStoreLost", err)
	}
}
