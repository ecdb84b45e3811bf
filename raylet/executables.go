package raylet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/privdir"
)

// downloadTimeout bounds one executable download, so a stalled GCS stream cannot hold
// every lease that waits for the same executable forever.
const downloadTimeout = 10 * time.Minute

// executableSource streams executables by SHA-256 (hex). Implementations must be safe
// for concurrent use; they need not verify the bytes: the cache does.
type executableSource interface {
	// fetch writes the executable's bytes to w and returns the size the source announced.
	// A source that does not hold the executable returns an error wrapping
	// ErrExecutableNotUploaded; bytes that cannot be right (more than announced), one
	// wrapping ErrExecutableCorrupt.
	fetch(ctx context.Context, sha256 string, w io.Writer) (size int64, err error)
}

// executableCache keeps executables on local disk as <dir>/<sha256>, downloading each
// once. Raylets on one machine may share dir: a file appears there only complete and
// verified, by atomic rename. Safe for concurrent use.
//
// A file's modification time is its last use, shared by the raylets of the directory:
// a lease that asks for the executable sets it, and so does every prune for the files
// this raylet's live workers run.
type executableCache struct {
	dir    string
	source executableSource
	// ctx ends with the raylet: a download outlives the lease request that started it
	// (others may wait for it), not the raylet.
	ctx context.Context

	mu       sync.Mutex
	inflight map[string]*download
	// pins counts the leases in flight per hash, from the ask until their worker is in
	// the pool: prune keeps those files.
	pins map[string]int
}

// download is one executable being fetched; done closes when err is set.
type download struct {
	done chan struct{}
	err  error
}

func newExecutableCache(ctx context.Context, dir string, source executableSource) *executableCache {
	return &executableCache{dir: dir, source: source, ctx: ctx, inflight: map[string]*download{}, pins: map[string]int{}}
}

// use records that a lease asked for an executable at now and pins it until release is
// called: the lease calls release once its worker is in the pool (or it failed).
func (c *executableCache) use(sum string, now time.Time) (release func()) {
	c.mu.Lock()
	c.pins[sum]++
	c.mu.Unlock()
	// Not cached yet: the download writes it with a fresh modification time.
	_ = os.Chtimes(filepath.Join(c.dir, sum), now, now)
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.pins[sum]--; c.pins[sum] <= 0 {
				delete(c.pins, sum)
			}
		})
	}
}

// prunedExecutable is one file prune removed.
type prunedExecutable struct {
	sha256    string
	bytes     int64
	unusedFor time.Duration
}

// prune removes the cached executables cachedExecutablesToRemove picks. inUse returns
// the hashes live workers run; prune calls it holding c.mu (so a lease's pin and its
// worker joining the pool cannot both escape it), and it must not call the cache. The
// files in use get now as their modification time, for the raylets sharing the
// directory. Only <sha256> files are considered: downloads in progress and foreign
// files stay.
func (c *executableCache) prune(now time.Time, ttl time.Duration, inUse func() map[string]bool) ([]prunedExecutable, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // nothing downloaded yet
	}
	if err != nil {
		return nil, fmt.Errorf("executable cache %s: %w", c.dir, err)
	}
	used := maps.Clone(inUse())
	if used == nil {
		used = map[string]bool{}
	}
	for sum := range c.pins {
		used[sum] = true
	}
	lastUse, sizes := map[string]time.Time{}, map[string]int64{}
	for _, entry := range entries {
		sum := entry.Name()
		if checkSHA256(sum) != nil || !entry.Type().IsRegular() {
			continue
		}
		if used[sum] {
			_ = os.Chtimes(filepath.Join(c.dir, sum), now, now)
		}
		info, err := entry.Info()
		if err != nil {
			continue // removed by a raylet sharing the directory
		}
		lastUse[sum], sizes[sum] = info.ModTime(), info.Size()
	}
	var pruned []prunedExecutable
	for _, sum := range cachedExecutablesToRemove(lastUse, used, now, ttl) {
		err := os.Remove(filepath.Join(c.dir, sum))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return pruned, fmt.Errorf("executable cache: %w", err)
		}
		pruned = append(pruned, prunedExecutable{sha256: sum, bytes: sizes[sum], unusedFor: now.Sub(lastUse[sum])})
	}
	return pruned, nil
}

// cachedExecutablesToRemove decides which cached executables go: those not inUse (run
// by a live worker, or asked for by a lease in flight) whose last use is ttl or more
// before now. The result is sorted.
func cachedExecutablesToRemove(lastUse map[string]time.Time, inUse map[string]bool, now time.Time, ttl time.Duration) []string {
	var doomed []string
	for sum, last := range lastUse {
		if !inUse[sum] && now.Sub(last) >= ttl {
			doomed = append(doomed, sum)
		}
	}
	slices.Sort(doomed)
	return doomed
}

// path returns the local path of the executable, downloading it first if needed.
// Concurrent calls for one hash share one download.
func (c *executableCache) path(ctx context.Context, sum string) (string, error) {
	if err := checkSHA256(sum); err != nil {
		return "", err
	}
	// The directory and the file are trusted only when they are ours alone and the
	// file's bytes have the hash: a file planted or changed by another user is never run.
	if err := privdir.Ensure(c.dir); err != nil {
		return "", refusef(ErrInternal, "executable cache: %w", err)
	}
	final := filepath.Join(c.dir, sum)
	if verifyCached(final, sum) {
		return final, nil
	}
	c.mu.Lock()
	d := c.inflight[sum]
	if d == nil {
		d = &download{done: make(chan struct{})}
		c.inflight[sum] = d
		go c.run(sum, d)
	}
	c.mu.Unlock()
	select {
	case <-d.done:
		if d.err != nil {
			return "", d.err
		}
		return final, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *executableCache) run(sum string, d *download) {
	d.err = c.download(sum)
	c.mu.Lock()
	delete(c.inflight, sum)
	c.mu.Unlock()
	close(d.done)
}

// download fetches one executable into a temporary file beside its final name, checks
// its size and hash, and renames it into place.
func (c *executableCache) download(sum string) error {
	final := filepath.Join(c.dir, sum)
	if verifyCached(final, sum) { // another download (or raylet) finished in the meantime
		return nil
	}
	tmp, err := os.CreateTemp(c.dir, sum+".download-*")
	if err != nil {
		return refusef(ErrInternal, "executable cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	ctx, cancel := context.WithTimeout(c.ctx, downloadTimeout)
	defer cancel()
	hash := sha256.New()
	count := &byteCounter{}
	size, err := c.source.fetch(ctx, sum, io.MultiWriter(tmp, hash, count))
	if closeErr := tmp.Close(); err == nil && closeErr != nil {
		err = refusef(ErrInternal, "executable cache: %w", closeErr)
	}
	if err != nil {
		return downloadError(sum, err)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); count.n != size || got != sum {
		return refusef(ErrExecutableCorrupt, "executable %s: downloaded %d bytes (announced %d) with SHA-256 %s; refused", sum, count.n, size, got)
	}
	if err := os.Chmod(tmp.Name(), 0o700); err != nil {
		return refusef(ErrInternal, "executable cache: %w", err)
	}
	// The rename replaces whatever else held the name (a planted or damaged file).
	if err := os.Rename(tmp.Name(), final); err != nil {
		return refusef(ErrInternal, "executable cache: %w", err)
	}
	return nil
}

// downloadError keeps a missing executable (the driver must upload first), corrupt
// bytes and internal failures as they are, and makes anything else
// ErrExecutableUnavailable: a retry may succeed.
func downloadError(sum string, err error) error {
	switch {
	case errors.Is(err, ErrExecutableNotUploaded):
		return refusef(ErrExecutableNotUploaded, "executable_sha256 %s: the GCS does not hold it (a driver uploads its executable when it connects)", sum)
	case errors.Is(err, ErrExecutableCorrupt), errors.Is(err, ErrInternal):
		return err
	}
	return refusef(ErrExecutableUnavailable, "download executable %s from the GCS: %v", sum, err)
}

// checkSHA256 accepts 64 lowercase hex characters, so a hash is also a safe file name.
func checkSHA256(sum string) error {
	if len(sum) != 2*sha256.Size {
		return fielderr.New(ErrInvalidExecutable, "executable_sha256", "want %d hex characters (SHA-256), got %q", 2*sha256.Size, sum)
	}
	for _, c := range sum {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fielderr.New(ErrInvalidExecutable, "executable_sha256", "want lowercase hex, got %q", sum)
		}
	}
	return nil
}

// verifyCached reports whether path is a file of this user's alone whose bytes have
// the SHA-256 sum. Checked before every use, so a file changed after its download is
// never run.
func verifyCached(path, sum string) bool {
	if privdir.CheckFile(path) != nil {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return false
	}
	return hex.EncodeToString(hash.Sum(nil)) == sum
}

type byteCounter struct{ n int64 }

func (b *byteCounter) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	return len(p), nil
}

// executableCacheLoop removes the cached executables unused for ExecutableCacheTTL
// (see executableCache.prune), until Stop.
func (r *Raylet) executableCacheLoop() {
	r.everyFractionOf(r.cfg.ExecutableCacheTTL, func(now time.Time) {
		r.pruneExecutableCache(now)
	})
}

func (r *Raylet) pruneExecutableCache(now time.Time) {
	pruned, err := r.executables.prune(now, r.cfg.ExecutableCacheTTL, r.executablesInUse)
	for _, p := range pruned {
		r.log.Info().Str("sha256", p.sha256).Int64("bytes", p.bytes).Dur("unused_for", p.unusedFor).
			Msg("removed a cached executable")
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("could not prune the executable cache")
	}
}

// executablesInUse is the executables of the live worker processes (starting, leased
// or idle): a worker that restarts from the same file must find it.
func (r *Raylet) executablesInUse() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	used := map[string]bool{}
	for _, w := range r.workers {
		used[w.key.executableSHA256] = true
	}
	return used
}
