package raylet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		return 0, status.Errorf(codes.NotFound, "executable %s: not uploaded", sum)
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
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755", info.Mode())
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
