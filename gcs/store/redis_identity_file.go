package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// identityFile keeps, outside Redis, the store's UUID and the highest write sequence
// this cluster's GCS acknowledged, so that a restarted GCS can tell a Redis that came
// back empty (another UUID, or none) or rolled back (a sequence below the recorded one)
// from its own store. The record has a fixed width and is rewritten in place after
// every acknowledged write (one pwrite, no fsync: it must survive the GCS process, and a
// host crash that loses its last records only makes the check weaker).
type identityFile struct {
	mu      sync.Mutex
	file    *os.File
	uuid    string
	written int64
}

// ErrIdentityFile wraps what goes wrong reading or writing RedisConfig.IdentityFile.
var ErrIdentityFile = errors.New("store identity file")

// identityRecordWidth is the width of the sequence in the record, so every record has
// the same length and an in-place rewrite never leaves a longer one's tail behind.
const identityRecordWidth = 20

// readIdentityFile returns the UUID and sequence path holds; a missing file holds none.
// The first line is "<uuid> <sequence>", or "<uuid>" alone (sequence 0).
func readIdentityFile(path string) (uuid string, seq int64, err error) {
	held, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrIdentityFile, err)
	}
	line, _, _ := strings.Cut(string(held), "\n")
	fields := strings.Fields(line)
	switch len(fields) {
	case 0:
		return "", 0, fmt.Errorf("%w %s: empty: it should hold the store's UUID and write sequence; remove it only if this cluster's Redis data is meant to be new", ErrIdentityFile, path)
	case 1:
		return fields[0], 0, nil
	}
	seq, err = strconv.ParseInt(fields[1], 10, 64)
	if err != nil || seq < 0 {
		return "", 0, fmt.Errorf("%w %s: write sequence %q: not a whole number >= 0", ErrIdentityFile, path, fields[1])
	}
	return fields[0], seq, nil
}

// openIdentityFile opens (creating) path and records uuid and seq in it.
func openIdentityFile(path, uuid string, seq int64) (*identityFile, error) {
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIdentityFile, err)
	}
	f := &identityFile{file: file, uuid: uuid, written: -1}
	if err := f.record(seq); err != nil {
		_ = file.Close()
		return nil, err
	}
	return f, nil
}

// record writes seq when it is above what the file holds.
func (f *identityFile) record(seq int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= f.written {
		return nil
	}
	line := fmt.Sprintf("%s %0*d\n", f.uuid, identityRecordWidth, seq)
	if _, err := f.file.WriteAt([]byte(line), 0); err != nil {
		return fmt.Errorf("%w %s: %w", ErrIdentityFile, f.file.Name(), err)
	}
	f.written = seq
	return nil
}

func (f *identityFile) close() error { return f.file.Close() }
