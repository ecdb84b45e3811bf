// Package logbuf is a log sink for tests: a server's goroutines write to it while the
// test reads what was logged.
package logbuf

import (
	"strings"
	"sync"
)

// Buffer collects log lines; safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Has reports whether s was logged.
func (b *Buffer) Has(s string) bool { return strings.Contains(b.String(), s) }
