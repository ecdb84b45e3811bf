package store_test

import (
	"errors"
	"os"
	"path/filepath"
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
