package raylet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// fakeExecutables serves executables from memory. corrupt flips a byte of what it
// sends (announcing the true hash and size); release, when set, holds every fetch until
// it is closed.
type fakeExecutables struct {
	files   map[string][]byte
	corrupt bool
	release chan struct{}
	fetches atomic.Int32
}

var _ executableSource = (*fakeExecutables)(nil)

func (f *fakeExecutables) fetch(ctx context.Context, sum string, w io.Writer) (int64, error) {
	f.fetches.Add(1)
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	data, ok := f.files[sum]
	if !ok {
		return 0, fmt.Errorf("executable %s: %w", sum, ErrExecutableNotUploaded)
	}
	sent := bytes.Clone(data)
	if f.corrupt {
		sent[len(sent)/2] ^= 0xff
	}
	_, err := w.Write(sent)
	return int64(len(data)), err
}

func executableFixture() (string, []byte) {
	data := []byte("#!/bin/sh\necho worker\n")
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), data
}

func TestExecutableCacheDownloadsVerifiesAndCaches(t *testing.T) {
	sum, data := executableFixture()
	source := &fakeExecutables{files: map[string][]byte{sum: data}}
	dir := filepath.Join(t.TempDir(), "cache")
	cache := newExecutableCache(context.Background(), dir, source)

	path, err := cache.path(context.Background(), sum)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, sum) {
		t.Fatalf("path %s, want <dir>/<sha256>", path)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("cached file %q (%v)", got, err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", info.Mode())
	}
	if _, err := cache.path(context.Background(), sum); err != nil || source.fetches.Load() != 1 {
		t.Fatalf("second lookup: %v after %d fetches, want the cached file after 1", err, source.fetches.Load())
	}
	// Another raylet sharing the directory finds it without downloading.
	other := newExecutableCache(context.Background(), dir, &fakeExecutables{})
	if _, err := other.path(context.Background(), sum); err != nil {
		t.Fatalf("shared cache: %v", err)
	}
}

func isRegularFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// Another local user pre-creates the cache directory under /tmp and plants a file under
// an executable's name: the raylet refuses a directory others can write (or own), and
// never runs a cached file whose bytes lack the hash: it downloads the real one over it.
func TestExecutableCacheNeverRunsAPlantedFile(t *testing.T) {
	sum, data := executableFixture()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	source := &fakeExecutables{files: map[string][]byte{sum: data}}
	cache := newExecutableCache(context.Background(), dir, source)
	if _, err := cache.path(context.Background(), sum); err == nil || !strings.Contains(err.Error(), "write") {
		t.Fatalf("a cache directory others can write: %v, want refused", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(dir, sum)
	if err := os.WriteFile(planted, []byte("#!/bin/sh\necho planted\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	path, err := cache.path(context.Background(), sum)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) || source.fetches.Load() != 1 {
		t.Fatalf("cached file %q after %d fetches, want the real bytes downloaded over the planted ones", got, source.fetches.Load())
	}
	// A cached file changed after its download is caught at the next use too.
	if err := os.WriteFile(planted, []byte("#!/bin/sh\necho changed\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := cache.path(context.Background(), sum); err != nil || source.fetches.Load() != 2 {
		t.Fatalf("a changed cached file: %v after %d fetches, want it downloaded again", err, source.fetches.Load())
	}
}

func TestExecutableCacheRejectsCorruptDownloads(t *testing.T) {
	sum, data := executableFixture()
	dir := t.TempDir()
	cache := newExecutableCache(context.Background(), dir, &fakeExecutables{files: map[string][]byte{sum: data}, corrupt: true})
	_, err := cache.path(context.Background(), sum)
	wantCode(t, err, codes.DataLoss, sum, "refused")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused download left %v in the cache", entries)
	}

	_, err = cache.path(context.Background(), sum[:63]+"0")
	wantCode(t, err, codes.NotFound, "executable_sha256")
	_, err = cache.path(context.Background(), "../etc/passwd")
	wantCode(t, err, codes.InvalidArgument, "executable_sha256")
}

func TestExecutableCacheDownloadsOnceForConcurrentRequests(t *testing.T) {
	sum, data := executableFixture()
	source := &fakeExecutables{files: map[string][]byte{sum: data}, release: make(chan struct{})}
	cache := newExecutableCache(context.Background(), t.TempDir(), source)
	const requests = 8
	var started, done sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			_, err := cache.path(context.Background(), sum)
			errs <- err
		}()
	}
	started.Wait()
	eventually(t, "the download started", func() bool { return source.fetches.Load() == 1 })
	close(source.release)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := source.fetches.Load(); n != 1 {
		t.Fatalf("%d downloads for %d concurrent requests, want 1", n, requests)
	}
}

// A request that gives up does not cancel the download others wait for.
func TestExecutableCacheDownloadOutlivesCancelledRequest(t *testing.T) {
	sum, data := executableFixture()
	source := &fakeExecutables{files: map[string][]byte{sum: data}, release: make(chan struct{})}
	cache := newExecutableCache(context.Background(), t.TempDir(), source)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := cache.path(ctx, sum)
	wantCode(t, err, codes.Canceled)
	close(source.release)
	if _, err := cache.path(context.Background(), sum); err != nil {
		t.Fatal(err)
	}
	if n := source.fetches.Load(); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
}

func TestCachedExecutablesToRemove(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ttl := time.Hour
	cases := []struct {
		name    string
		lastUse map[string]time.Time
		inUse   []string
		want    []string
	}{
		{"empty cache", nil, nil, nil},
		{"used within the TTL", map[string]time.Time{"a": now.Add(-ttl + time.Second)}, nil, nil},
		{"unused for exactly the TTL", map[string]time.Time{"a": now.Add(-ttl)}, nil, []string{"a"}},
		{"in use, however old its last use", map[string]time.Time{"a": now.Add(-24 * ttl)}, []string{"a"}, nil},
		{"modified in the future (a clock step back)", map[string]time.Time{"a": now.Add(ttl)}, nil, nil},
		{
			"mixed, sorted by hash",
			map[string]time.Time{"c": now.Add(-2 * ttl), "b": now, "a": now.Add(-2 * ttl), "d": now.Add(-2 * ttl)},
			[]string{"d"},
			[]string{"a", "c"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inUse := map[string]bool{}
			for _, sum := range tc.inUse {
				inUse[sum] = true
			}
			if got := cachedExecutablesToRemove(tc.lastUse, inUse, now, ttl); !slices.Equal(got, tc.want) {
				t.Fatalf("cachedExecutablesToRemove = %q, want %q", got, tc.want)
			}
		})
	}
}

// backdate makes a cached file look unused for age.
func backdate(t *testing.T, path string, age time.Duration) {
	t.Helper()
	old := time.Now().Add(-age)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func TestExecutableCachePruneKeepsWhatIsInUse(t *testing.T) {
	files := map[string][]byte{}
	var sums []string
	for _, body := range []string{"unused", "run by a worker", "asked for by a lease"} {
		data := []byte("#!/bin/sh\necho " + body + "\n")
		sum := sha256.Sum256(data)
		files[hex.EncodeToString(sum[:])] = data
		sums = append(sums, hex.EncodeToString(sum[:]))
	}
	unused, running, leased := sums[0], sums[1], sums[2]
	source := &fakeExecutables{files: files}
	dir := t.TempDir()
	cache := newExecutableCache(context.Background(), dir, source)
	for _, sum := range sums {
		if _, err := cache.path(context.Background(), sum); err != nil {
			t.Fatal(err)
		}
		backdate(t, filepath.Join(dir, sum), 2*time.Hour)
	}
	// Files that are no cached executable stay, however old.
	for _, name := range []string{"notes.txt", unused + ".download-123"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		backdate(t, filepath.Join(dir, name), 2*time.Hour)
	}
	release := cache.use(leased, time.Now().Add(-2*time.Hour)) // asked for, not started yet

	now := time.Now()
	pruned, err := cache.prune(now, time.Hour, func() map[string]bool { return map[string]bool{running: true} })
	if err != nil {
		t.Fatal(err)
	}
	if len(pruned) != 1 || pruned[0].sha256 != unused || pruned[0].bytes != int64(len(files[unused])) || pruned[0].unusedFor < 2*time.Hour {
		t.Fatalf("pruned %+v, want only %s with its size", pruned, unused)
	}
	for _, name := range []string{running, leased, "notes.txt", unused + ".download-123"} {
		if !isRegularFile(filepath.Join(dir, name)) {
			t.Errorf("%s was removed", name)
		}
	}
	// What is in use gets a fresh modification time, for raylets sharing the directory.
	if info, err := os.Stat(filepath.Join(dir, running)); err != nil || info.ModTime().Before(now.Add(-time.Second)) {
		t.Errorf("in-use file's modification time %v (%v), want about %v", info.ModTime(), err, now)
	}

	// Once the worker exited and the lease released its pin, both go after the TTL.
	release()
	release() // idempotent
	backdate(t, filepath.Join(dir, leased), 2*time.Hour)
	backdate(t, filepath.Join(dir, running), 2*time.Hour)
	if pruned, err := cache.prune(time.Now(), time.Hour, func() map[string]bool { return nil }); err != nil || len(pruned) != 2 {
		t.Fatalf("second prune: %+v, %v; want the two executables no worker runs", pruned, err)
	}
	// A later lease downloads it again.
	if _, err := cache.path(context.Background(), unused); err != nil {
		t.Fatal(err)
	}
	if n := source.fetches.Load(); n != 4 {
		t.Fatalf("%d downloads, want 4 (three, then the pruned one again)", n)
	}
	// A cache directory that does not exist yet is no error.
	empty := newExecutableCache(context.Background(), filepath.Join(dir, "missing"), source)
	if pruned, err := empty.prune(time.Now(), time.Hour, func() map[string]bool { return nil }); err != nil || len(pruned) != 0 {
		t.Fatalf("prune of a missing directory: %v, %v", pruned, err)
	}
}

// End to end: the raylet's loop keeps the executable of a live worker, removes it once no
// worker runs it and it is unused past the TTL, and the next lease downloads it again.
func TestRayletPrunesUnusedExecutables(t *testing.T) {
	const ttl = 400 * time.Millisecond
	h := startWorkerHarness(t, func(cfg *Config) { cfg.ExecutableCacheTTL = ttl })
	if !h.uploaded {
		t.Skip("the GCS does not serve ExecutableService: a pruned executable could not be downloaded again")
	}
	dir := h.raylet.cfg.ExecutableCacheDir
	self := filepath.Join(dir, h.sha)
	stale := filepath.Join(dir, strings.Repeat("ab", 32))
	if err := os.WriteFile(stale, []byte("old build"), 0o755); err != nil {
		t.Fatal(err)
	}
	backdate(t, stale, time.Hour)

	w := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	eventually(t, "the stale executable is removed", func() bool { return !isRegularFile(stale) })
	// While the worker lives, every prune refreshes its file instead of removing it.
	backdate(t, self, time.Hour)
	eventually(t, "the running worker's executable is refreshed", func() bool {
		info, err := os.Stat(self)
		return err == nil && time.Since(info.ModTime()) < ttl
	})

	if _, err := h.client.ReturnWorker(context.Background(), &pb.ReturnWorkerRequest{WorkerId: w.WorkerId, Disconnect: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker exits", func() bool { return len(h.workers(t)) == 0 })
	eventually(t, "the executable no worker runs is removed after the TTL", func() bool { return !isRegularFile(self) })

	again := h.mustLease(t, &pb.RequestWorkerLeaseRequest{Resources: map[string]float64{"CPU": 1}})
	if askEnv(t, again).pid == 0 || !isRegularFile(self) {
		t.Fatal("the next lease did not download the executable again and start it")
	}
}
