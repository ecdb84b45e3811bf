package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig says where the Redis backend keeps its tables.
type RedisConfig struct {
	// Address is the server's "host:port", e.g. "127.0.0.1:6379".
	Address string
	// Password is sent with AUTH when not empty.
	Password string
	// Namespace prefixes every hash, "<Namespace>:<table>", so several clusters can
	// share one server. It may not contain ':', which would make two namespaces'
	// hashes collide.
	Namespace string
	// DialTimeout bounds each connection attempt and the PING that NewRedis sends,
	// so a GCS pointed at a dead server fails at start-up instead of hanging.
	DialTimeout time.Duration
}

// DefaultRedisConfig returns a config for a server on the local default port.
func DefaultRedisConfig() RedisConfig {
	return RedisConfig{
		Address:     "127.0.0.1:6379",
		Namespace:   "raygo",
		DialTimeout: 2 * time.Second,
	}
}

// Validate reports the first field that NewRedis could not use.
func (c RedisConfig) Validate() error {
	if err := validateRedisAddress(c.Address); err != nil {
		return err
	}
	if c.Namespace == "" {
		return fmt.Errorf("redis namespace %q: must not be empty", c.Namespace)
	}
	if strings.Contains(c.Namespace, ":") {
		return fmt.Errorf("redis namespace %q: must not contain ':'", c.Namespace)
	}
	if c.DialTimeout <= 0 {
		return fmt.Errorf("redis dial timeout %s: must be positive", c.DialTimeout)
	}
	return nil
}

func validateRedisAddress(address string) error {
	if address == "" {
		return fmt.Errorf("redis address %q: must not be empty", address)
	}
	if !strings.Contains(address, ":") {
		return fmt.Errorf("redis address %q: missing port", address)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("redis address %q: must be host:port", address)
	}
	if host == "" {
		return fmt.Errorf("redis address %q: missing host", address)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("redis address %q: port %q must be a number in 1-65535", address, port)
	}
	return nil
}

// Redis keeps each table in one hash, "<namespace>:<table>", so a table is read or
// written with single hash commands and a restarted GCS finds every table again.
type Redis struct {
	client    *redis.Client
	namespace string
	// closed is checked before each call so that calls after Close fail with
	// ErrClosed even when go-redis would report something else.
	closed atomic.Bool
}

var _ Store = (*Redis)(nil)

// NewRedis connects to the server in cfg and checks it answers PING within
// cfg.DialTimeout.
func NewRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{
		Addr:        cfg.Address,
		Password:    cfg.Password,
		DialTimeout: cfg.DialTimeout,
		// go-redis already retries a failed command (MaxRetries), dialing again each
		// time; retrying each dial as well multiplies the attempts and, at start-up,
		// turns "connection refused" into a bare deadline error.
		DialerRetries: 1,
		// Without this a caller's deadline is ignored in favour of the read and write
		// timeouts.
		ContextTimeoutEnabled: true,
	})
	pingCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		// The ping error is what the caller needs; a close error would hide it.
		_ = client.Close()
		return nil, fmt.Errorf("redis at %s: %w", cfg.Address, err)
	}
	return &Redis{client: client, namespace: cfg.Namespace}, nil
}

// Persistence is how a Redis server keeps what it acknowledged (its append-only file).
type Persistence struct {
	// AppendOnly is `appendonly yes`: writes survive a restart of the server.
	AppendOnly bool
	// Fsync is `appendfsync`: "always" loses nothing even on a host crash, "everysec" up
	// to a second of writes, "no" what the kernel had not flushed.
	Fsync string
}

// Persistence asks the server (CONFIG GET appendonly, appendfsync). A server that
// refuses CONFIG (renamed or ACL-denied) returns an error: unverified.
func (r *Redis) Persistence(ctx context.Context) (Persistence, error) {
	values := map[string]string{}
	for _, key := range []string{"appendonly", "appendfsync"} {
		reply, err := r.client.ConfigGet(ctx, key).Result()
		if err != nil {
			return Persistence{}, r.wrap(err, "CONFIG GET %s", key)
		}
		values[key] = reply[key]
	}
	return Persistence{AppendOnly: values["appendonly"] == "yes", Fsync: values["appendfsync"]}, nil
}

// Name returns "redis".
func (r *Redis) Name() string { return "redis" }

// Get returns table[key].
func (r *Redis) Get(ctx context.Context, table, key string) ([]byte, bool, error) {
	if r.closed.Load() {
		return nil, false, ErrClosed
	}
	value, err := r.client.HGet(ctx, r.hash(table), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, r.wrap(err, "get %s[%q]", r.hash(table), key)
	}
	return value, true, nil
}

// GetAll returns every entry of table with one HGETALL, so the result is a snapshot.
func (r *Redis) GetAll(ctx context.Context, table string) (map[string][]byte, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	entries, err := r.client.HGetAll(ctx, r.hash(table)).Result()
	if err != nil {
		return nil, r.wrap(err, "get all of %s", r.hash(table))
	}
	values := make(map[string][]byte, len(entries))
	for key, value := range entries {
		values[key] = []byte(value)
	}
	return values, nil
}

// Put sets table[key] = value.
func (r *Redis) Put(ctx context.Context, table, key string, value []byte) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := r.client.HSet(ctx, r.hash(table), key, value).Err(); err != nil {
		return r.wrap(err, "put %s[%q]", r.hash(table), key)
	}
	return nil
}

// PutIfAbsent uses HSETNX, so two racing callers cannot both add the key.
func (r *Redis) PutIfAbsent(ctx context.Context, table, key string, value []byte) (bool, error) {
	if r.closed.Load() {
		return false, ErrClosed
	}
	added, err := r.client.HSetNX(ctx, r.hash(table), key, value).Result()
	if err != nil {
		return false, r.wrap(err, "put if absent %s[%q]", r.hash(table), key)
	}
	return added, nil
}

// Delete removes keys with one HDEL, which counts only the keys that existed.
func (r *Redis) Delete(ctx context.Context, table string, keys ...string) (int, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	// HDEL with no field is a syntax error, not a no-op.
	if len(keys) == 0 {
		return 0, nil
	}
	deleted, err := r.client.HDel(ctx, r.hash(table), keys...).Result()
	if err != nil {
		return 0, r.wrap(err, "delete %d keys of %s", len(keys), r.hash(table))
	}
	return int(deleted), nil
}

// Keys filters HKEYS on the client rather than with HSCAN MATCH: a glob pattern would
// need every '*', '?', '[' and '\' of the prefix escaped, and the GCS's tables are
// small enough to list whole.
func (r *Redis) Keys(ctx context.Context, table, prefix string) ([]string, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	all, err := r.client.HKeys(ctx, r.hash(table)).Result()
	if err != nil {
		return nil, r.wrap(err, "list keys of %s", r.hash(table))
	}
	keys := []string{}
	for _, key := range all {
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// Apply sends the batch inside MULTI/EXEC, so no other client runs a command between
// its ops. Redis does not roll back an op that fails inside EXEC; HSET and HDEL fail
// only on a key that is not a hash, which nothing in a namespace but this store writes.
func (r *Redis) Apply(ctx context.Context, ops []Op) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := validateOps(ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, op := range ops {
			switch op.Kind {
			case OpPut:
				pipe.HSet(ctx, r.hash(op.Table), op.Key, op.Value)
			case OpDelete:
				pipe.HDel(ctx, r.hash(op.Table), op.Key)
			}
		}
		return nil
	})
	if err != nil {
		return r.wrap(err, "apply batch of %d ops in namespace %s", len(ops), r.namespace)
	}
	return nil
}

// Increment uses HINCRBY, which keeps the counter as decimal text.
func (r *Redis) Increment(ctx context.Context, table, key string, delta int64) (int64, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	value, err := r.client.HIncrBy(ctx, r.hash(table), key, delta).Result()
	if err != nil {
		return 0, r.wrap(err, "increment %s[%q]", r.hash(table), key)
	}
	return value, nil
}

// Close closes the client's connections; the data stays on the server.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return ErrClosed
	}
	if err := r.client.Close(); err != nil {
		return fmt.Errorf("close redis client: %w", err)
	}
	return nil
}

func (r *Redis) hash(table string) string {
	return r.namespace + ":" + table
}

// wrap names the failed call. A call that raced with Close fails inside go-redis with
// its own closed error; it is reported as ErrClosed like every later call.
func (r *Redis) wrap(err error, format string, args ...any) error {
	if errors.Is(err, redis.ErrClosed) {
		err = ErrClosed
	}
	return fmt.Errorf("redis "+format+": %w", append(args, err)...)
}

// quietRedisLogger drops go-redis's own log lines: every failure they describe also
// reaches the caller as an error, and a CLI must print one line, not a pool's retries.
type quietRedisLogger struct{}

func (quietRedisLogger) Printf(context.Context, string, ...interface{}) {}

func init() { redis.SetLogger(quietRedisLogger{}) }
