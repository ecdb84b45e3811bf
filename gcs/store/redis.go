package store

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig says where the Redis backend keeps its tables.
type RedisConfig struct {
	// Address is the server's "host:port", e.g. "127.0.0.1:6379".
	Address string
	// Username, when not empty, is the ACL user AUTH names (Redis 6+); empty is the
	// default user.
	Username string
	// Password is sent with AUTH when not empty.
	Password string
	// TLS, when not nil, is the client side of TLS to a server on its tls-port.
	TLS *tls.Config
	// Namespace prefixes every hash, "<Namespace>:<table>", so several clusters can
	// share one server. It may not contain ':', which would make two namespaces'
	// hashes collide.
	Namespace string
	// DialTimeout bounds each connection attempt and the PING that NewRedis sends,
	// so a GCS pointed at a dead server fails at start-up instead of hanging.
	DialTimeout time.Duration
	// IdentityFile, when set, is a file outside Redis that keeps the store's UUID and the
	// highest write sequence acknowledged (rewritten after every write). When it holds
	// them (a restarted GCS), NewRedis fails with ErrStoreLost if the server holds no
	// UUID (it came back empty) or another, or a sequence below the recorded one (it
	// restarted from older data), instead of serving a partial or rolled-back table.
	IdentityFile string
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

	// The store's identity: the hash "<namespace>:store" holds a UUID, set once, and a
	// write sequence that every write bumps inside its own MULTI/EXEC. A write whose
	// EXEC sees another UUID (or none: the server restarted empty) or a sequence not above
	// the highest this client had acknowledged when it began (the server rolled back)
	// marks the store lost: every call then fails with ErrStoreLost.
	identity string
	ackedSeq atomic.Int64
	// identityFile records ackedSeq after every write; nil without RedisConfig.IdentityFile.
	identityFile *identityFile
	lostErr      atomic.Pointer[error]
	lost         chan struct{}
	lostOnce     sync.Once
}

// storeTable is the hash of the store's identity, with fields "uuid" and "seq".
const storeTable = "store"

// Lost is closed once the store found that Redis lost acknowledged writes.
func (r *Redis) Lost() <-chan struct{} { return r.lost }

// LostErr says how the store was lost; nil while it is not.
func (r *Redis) LostErr() error {
	if p := r.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *Redis) markLost(err error) error {
	err = fmt.Errorf("%w: %v", ErrStoreLost, err)
	r.lostOnce.Do(func() {
		r.lostErr.Store(&err)
		close(r.lost)
	})
	return r.LostErr()
}

// usable is the check every call makes first.
func (r *Redis) usable() error {
	if r.closed.Load() {
		return ErrClosed
	}
	return r.LostErr()
}

// claimIdentity reads the store's UUID and write sequence, creating the UUID in a store
// that has none (a new namespace, or one written before stores had identities); with
// expect, the store must already hold that UUID.
func (r *Redis) claimIdentity(ctx context.Context, expect string, expectSeq int64) error {
	uuid := make([]byte, 16)
	if _, err := rand.Read(uuid); err != nil {
		return err
	}
	hash := r.hash(storeTable)
	if expect != "" {
		held, err := r.client.HGet(ctx, hash, "uuid").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return r.wrap(err, "read the store identity")
		}
		if held != expect {
			return fmt.Errorf("%w: Redis at %s holds store %q, not the %q this cluster used: it restarted without its data (no append-only file?) or was replaced; restore its data, or start a new cluster",
				ErrStoreLost, r.client.Options().Addr, held, expect)
		}
	}
	if err := r.client.HSetNX(ctx, hash, "uuid", hex.EncodeToString(uuid)).Err(); err != nil {
		return r.wrap(err, "create the store identity")
	}
	values, err := r.client.HMGet(ctx, hash, "uuid", "seq").Result()
	if err != nil {
		return r.wrap(err, "read the store identity")
	}
	r.identity, _ = values[0].(string)
	if seq, ok := values[1].(string); ok {
		n, err := strconv.ParseInt(seq, 10, 64)
		if err != nil {
			return fmt.Errorf("redis %s seq %q: %w", hash, seq, err)
		}
		r.ackedSeq.Store(n)
	}
	if held := r.ackedSeq.Load(); held < expectSeq {
		return fmt.Errorf("%w: Redis at %s holds store %q at write %d, but this cluster acknowledged write %d: it restarted from older data; restore its latest data, or start a new cluster",
			ErrStoreLost, r.client.Options().Addr, r.identity, held, expectSeq)
	}
	return nil
}

// Identity is the store's UUID.
func (r *Redis) Identity() string { return r.identity }

// write runs ops inside MULTI/EXEC with the identity check: it bumps the sequence and
// reads the UUID in the same transaction, and marks the store lost when they show that
// the server no longer holds what was acknowledged. The write is then reported failed.
func (r *Redis) write(ctx context.Context, what string, ops func(pipe redis.Pipeliner)) error {
	if err := r.usable(); err != nil {
		return err
	}
	before := r.ackedSeq.Load()
	hash := r.hash(storeTable)
	var seq *redis.IntCmd
	var uuid *redis.StringCmd
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		seq = pipe.HIncrBy(ctx, hash, "seq", 1)
		uuid = pipe.HGet(ctx, hash, "uuid")
		ops(pipe)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return r.wrap(err, "%s", what)
	}
	got, _ := uuid.Result()
	switch n := seq.Val(); {
	case got != r.identity:
		return r.markLost(fmt.Errorf("%s: the server at %s holds store %q, not %q: it restarted without its data (no append-only file?) or another store replaced it",
			what, r.client.Options().Addr, got, r.identity))
	case n <= before:
		return r.markLost(fmt.Errorf("%s: the write sequence went back from %d to %d: the server restarted from older data", what, before, n))
	default:
		for {
			old := r.ackedSeq.Load()
			if n <= old || r.ackedSeq.CompareAndSwap(old, n) {
				break
			}
		}
	}
	if r.identityFile != nil {
		// Recorded before the write is acknowledged; a write the file cannot record is
		// reported failed, as one Redis could not persist.
		return r.identityFile.record(seq.Val())
	}
	return nil
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
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLSConfig:   cfg.TLS,
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
	r := &Redis{client: client, namespace: cfg.Namespace, lost: make(chan struct{})}
	var expect string
	var expectSeq int64
	if cfg.IdentityFile != "" {
		var err error
		if expect, expectSeq, err = readIdentityFile(cfg.IdentityFile); err != nil {
			_ = client.Close()
			return nil, err
		}
	}
	if err := r.claimIdentity(ctx, expect, expectSeq); err != nil {
		_ = client.Close()
		return nil, err
	}
	if cfg.IdentityFile != "" {
		file, err := openIdentityFile(cfg.IdentityFile, r.identity, r.ackedSeq.Load())
		if err != nil {
			_ = client.Close()
			return nil, err
		}
		r.identityFile = file
	}
	return r, nil
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
	if err := r.usable(); err != nil {
		return nil, false, err
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
	if err := r.usable(); err != nil {
		return nil, err
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
	return r.write(ctx, fmt.Sprintf("put %s[%q]", r.hash(table), key), func(pipe redis.Pipeliner) {
		pipe.HSet(ctx, r.hash(table), key, value)
	})
}

// PutIfAbsent uses HSETNX, so two racing callers cannot both add the key.
func (r *Redis) PutIfAbsent(ctx context.Context, table, key string, value []byte) (bool, error) {
	var added *redis.BoolCmd
	err := r.write(ctx, fmt.Sprintf("put if absent %s[%q]", r.hash(table), key), func(pipe redis.Pipeliner) {
		added = pipe.HSetNX(ctx, r.hash(table), key, value)
	})
	if err != nil {
		return false, err
	}
	return added.Val(), nil
}

// Delete removes keys with one HDEL, which counts only the keys that existed.
func (r *Redis) Delete(ctx context.Context, table string, keys ...string) (int, error) {
	if err := r.usable(); err != nil {
		return 0, err
	}
	// HDEL with no field is a syntax error, not a no-op.
	if len(keys) == 0 {
		return 0, nil
	}
	var deleted *redis.IntCmd
	err := r.write(ctx, fmt.Sprintf("delete %d keys of %s", len(keys), r.hash(table)), func(pipe redis.Pipeliner) {
		deleted = pipe.HDel(ctx, r.hash(table), keys...)
	})
	if err != nil {
		return 0, err
	}
	return int(deleted.Val()), nil
}

// Keys filters HKEYS on the client rather than with HSCAN MATCH: a glob pattern would
// need every '*', '?', '[' and '\' of the prefix escaped, and the GCS's tables are
// small enough to list whole.
func (r *Redis) Keys(ctx context.Context, table, prefix string) ([]string, error) {
	if err := r.usable(); err != nil {
		return nil, err
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
	if err := r.usable(); err != nil {
		return err
	}
	if err := validateOps(ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	return r.write(ctx, fmt.Sprintf("apply batch of %d ops in namespace %s", len(ops), r.namespace), func(pipe redis.Pipeliner) {
		for _, op := range ops {
			switch op.Kind {
			case OpPut:
				pipe.HSet(ctx, r.hash(op.Table), op.Key, op.Value)
			case OpDelete:
				pipe.HDel(ctx, r.hash(op.Table), op.Key)
			}
		}
	})
}

// Increment uses HINCRBY, which keeps the counter as decimal text.
func (r *Redis) Increment(ctx context.Context, table, key string, delta int64) (int64, error) {
	var value *redis.IntCmd
	err := r.write(ctx, fmt.Sprintf("increment %s[%q]", r.hash(table), key), func(pipe redis.Pipeliner) {
		value = pipe.HIncrBy(ctx, r.hash(table), key, delta)
	})
	if err != nil {
		return 0, err
	}
	return value.Val(), nil
}

// Close closes the client's connections; the data stays on the server.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return ErrClosed
	}
	err := r.client.Close()
	if r.identityFile != nil {
		err = errors.Join(err, r.identityFile.close())
	}
	if err != nil {
		return fmt.Errorf("close redis store: %w", err)
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
