package store_test

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/gcs/store/storetest"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
)

func TestRedisConformance(t *testing.T) {
	server := redisserver.Start(t)
	// One server serves every subtest; a namespace per subtest keeps them apart.
	storetest.Run(t, func(t *testing.T) store.Store {
		return newRedisStore(t, server.Addr, t.Name())
	})
}

func TestRedisName(t *testing.T) {
	server := redisserver.Start(t)
	if got := newRedisStore(t, server.Addr, "raygo").Name(); got != "redis" {
		t.Errorf("Name() = %q; want redis", got)
	}
}

// Other tools (redis-cli, a GCS of another version) find tables by the documented
// hash name, so it is part of the contract.
func TestRedisTableIsHashNamedNamespaceColonTable(t *testing.T) {
	server := redisserver.Start(t)
	s := newRedisStore(t, server.Addr, "cluster-a")
	if err := s.Put(t.Context(), store.TableNodes, "n1", []byte("alive")); err != nil {
		t.Fatalf("Put: %v", err)
	}

	client := redis.NewClient(&redis.Options{Addr: server.Addr})
	t.Cleanup(func() { _ = client.Close() })
	got, err := client.HGet(t.Context(), "cluster-a:nodes", "n1").Result()
	if err != nil || got != "alive" {
		t.Errorf(`HGET cluster-a:nodes n1 = %q, %v; want "alive"`, got, err)
	}
}

func TestRedisNamespacesAreIndependent(t *testing.T) {
	server := redisserver.Start(t)
	a := newRedisStore(t, server.Addr, "a")
	b := newRedisStore(t, server.Addr, "b")
	if err := a.Put(t.Context(), store.TableKV, "k", []byte("from a")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if value, found, err := b.Get(t.Context(), store.TableKV, "k"); err != nil || found {
		t.Errorf("Get from namespace b = %q, %v, %v; want not found", value, found, err)
	}
}

// A restarted GCS must find its tables again; with an append-only file that holds
// even when Redis itself crashed.
func TestRedisKeepsDataAcrossServerRestart(t *testing.T) {
	server := redisserver.Start(t)
	before := newRedisStore(t, server.Addr, "raygo")
	if err := before.Apply(t.Context(), []store.Op{
		{Kind: store.OpPut, Table: store.TableNodes, Key: "n1", Value: []byte("alive")},
		{Kind: store.OpPut, Table: store.TableJobs, Key: "j1", Value: []byte("running")},
	}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if _, err := before.Increment(t.Context(), store.TableMeta, "epoch", 1); err != nil {
		t.Fatalf("Increment: %v", err)
	}

	server.Kill()
	server.Restart()

	after := newRedisStore(t, server.Addr, "raygo")
	for _, want := range []struct{ table, key, value string }{
		{store.TableNodes, "n1", "alive"},
		{store.TableJobs, "j1", "running"},
		{store.TableMeta, "epoch", "1"},
	} {
		value, found, err := after.Get(t.Context(), want.table, want.key)
		if err != nil || !found || string(value) != want.value {
			t.Errorf("after restart Get(%s, %s) = %q, %v, %v; want %q", want.table, want.key, value, found, err, want.value)
		}
	}
}

func TestNewRedisUnreachable(t *testing.T) {
	// Accepts connections and never answers, as a hung server or a black-holed
	// route would.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })

	cases := []struct {
		name, address string
		// wantCause is what the error must wrap; nil checks only the prefix.
		wantCause error
	}{
		{"connection refused", "127.0.0.1:1", syscall.ECONNREFUSED},
		{"no answer", silent.Addr().String(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := store.DefaultRedisConfig()
			cfg.Address = tc.address
			cfg.DialTimeout = 500 * time.Millisecond
			start := time.Now()
			s, err := store.NewRedis(t.Context(), cfg)
			elapsed := time.Since(start)
			if err == nil {
				_ = s.Close()
				t.Fatalf("NewRedis(%s) = nil error; want one", tc.address)
			}
			if want := "redis at " + tc.address + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("NewRedis(%s) error = %q; want it to start with %q", tc.address, err, want)
			}
			if tc.wantCause != nil && !errors.Is(err, tc.wantCause) {
				t.Errorf("NewRedis(%s) error = %q; want it to wrap %q", tc.address, err, tc.wantCause)
			}
			// Generous against a slow CI machine, but far below go-redis's own
			// retries and 5 s defaults.
			if limit := 2 * cfg.DialTimeout; elapsed > limit {
				t.Errorf("NewRedis(%s) took %s; want under %s", tc.address, elapsed, limit)
			}
		})
	}
}

func TestRedisConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		modify  func(*store.RedisConfig)
		wantErr string
	}{
		{"default", func(*store.RedisConfig) {}, ""},
		{"ipv6", func(c *store.RedisConfig) { c.Address = "[::1]:6379" }, ""},
		{"empty address", func(c *store.RedisConfig) { c.Address = "" }, `redis address "": must not be empty`},
		{"no port", func(c *store.RedisConfig) { c.Address = "x" }, `redis address "x": missing port`},
		{"no host", func(c *store.RedisConfig) { c.Address = ":6379" }, `redis address ":6379": missing host`},
		{"too many colons", func(c *store.RedisConfig) { c.Address = "a:b:6379" }, `redis address "a:b:6379": must be host:port`},
		{"port not a number", func(c *store.RedisConfig) { c.Address = "x:redis" }, `redis address "x:redis": port "redis" must be a number in 1-65535`},
		{"port zero", func(c *store.RedisConfig) { c.Address = "x:0" }, `redis address "x:0": port "0" must be a number in 1-65535`},
		{"port too large", func(c *store.RedisConfig) { c.Address = "x:65536" }, `redis address "x:65536": port "65536" must be a number in 1-65535`},
		{"empty namespace", func(c *store.RedisConfig) { c.Namespace = "" }, `redis namespace "": must not be empty`},
		{"colon in namespace", func(c *store.RedisConfig) { c.Namespace = "a:b" }, `redis namespace "a:b": must not contain ':'`},
		{"zero dial timeout", func(c *store.RedisConfig) { c.DialTimeout = 0 }, `redis dial timeout 0s: must be positive`},
		{"negative dial timeout", func(c *store.RedisConfig) { c.DialTimeout = -time.Second }, `redis dial timeout -1s: must be positive`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := store.DefaultRedisConfig()
			tc.modify(&cfg)
			err := cfg.Validate()
			if got := errorString(err); got != tc.wantErr {
				t.Errorf("Validate() = %q; want %q", got, tc.wantErr)
			}
			// NewRedis must refuse the config before it dials anything.
			if tc.wantErr != "" {
				if _, err := store.NewRedis(t.Context(), cfg); errorString(err) != tc.wantErr {
					t.Errorf("NewRedis() error = %q; want %q", errorString(err), tc.wantErr)
				}
			}
		})
	}
}

func newRedisStore(t *testing.T, address, namespace string) *store.Redis {
	t.Helper()
	cfg := store.DefaultRedisConfig()
	cfg.Address = address
	cfg.Namespace = namespace
	s, err := store.NewRedis(t.Context(), cfg)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func errorString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
