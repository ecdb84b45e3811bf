package harness

import (
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"
)

// Shared is what a test package starts once and shares across its tests (a cluster
// the tests only read, or mutate and restore): the first Get starts it, the package's
// TestMain calls Close after m.Run. What start registers with Cleanup (nodes, temporary
// directories) lives until Close, not until the end of the test that happened to
// start it.
type Shared[T any] struct {
	once  sync.Once
	scope *packageScope
	value T
	err   error
}

// Get returns the shared value, starting it with start on the first call; a failure
// while starting fails this test and every later one that asks.
func (s *Shared[T]) Get(t testing.TB, what string, start func(tb testing.TB) T) T {
	t.Helper()
	s.once.Do(func() {
		s.scope = &packageScope{}
		defer func() {
			if r := recover(); r != nil {
				failure, ok := r.(scopeFailure)
				if !ok {
					panic(r)
				}
				s.err = errors.New(string(failure))
			}
		}()
		s.value = start(s.scope)
	})
	if s.err != nil {
		t.Fatalf("%s: %v", what, s.err)
	}
	return s.value
}

// Close runs the cleanups registered while starting, the last first.
func (s *Shared[T]) Close() {
	if s.scope != nil {
		s.scope.close()
	}
}

// scopeFailure is the panic by which a failure inside start reaches Get.
type scopeFailure string

// packageScope is the testing.TB given to a Shared value's start: it provides what
// the harness uses (Helper, Cleanup, TempDir, Fatal, Logf); anything else panics.
type packageScope struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (p *packageScope) Helper()      {}
func (p *packageScope) Name() string { return "shared" }
func (p *packageScope) Failed() bool { return false }

func (p *packageScope) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *packageScope) TempDir() string {
	dir, err := os.MkdirTemp("", "raygo-shared-")
	if err != nil {
		p.Fatal(err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (p *packageScope) Fatal(args ...any) { panic(scopeFailure(fmt.Sprint(args...))) }
func (p *packageScope) Fatalf(format string, args ...any) {
	panic(scopeFailure(fmt.Sprintf(format, args...)))
}
func (p *packageScope) Error(args ...any) { p.Fatal(args...) }
func (p *packageScope) Errorf(format string, args ...any) {
	p.Fatalf(format, args...)
}
func (p *packageScope) Log(args ...any)                 { log.Print(args...) }
func (p *packageScope) Logf(format string, args ...any) { log.Printf(format, args...) }

func (p *packageScope) close() {
	p.mu.Lock()
	cleanups := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}
