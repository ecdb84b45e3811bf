package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Memory is the embedded backend: tables live in maps behind one mutex, so every
// method, Apply included, is atomic with respect to the others.
//
// Values are copied on the way in and on the way out: the caller may reuse or mutate
// its slices without reaching the stored bytes.
type Memory struct {
	mu     sync.RWMutex
	tables map[string]map[string][]byte
	closed bool
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{tables: make(map[string]map[string][]byte)}
}

// Name returns "memory".
func (m *Memory) Name() string { return "memory" }

// usable reports why a call cannot proceed. The caller holds m.mu.
func (m *Memory) usable(ctx context.Context) error {
	if m.closed {
		return ErrClosed
	}
	// Nothing here blocks, but honouring a cancelled context keeps callers' behaviour
	// the same as on Redis.
	return ctx.Err()
}

// Get returns a copy of table[key].
func (m *Memory) Get(ctx context.Context, table, key string) ([]byte, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.usable(ctx); err != nil {
		return nil, false, err
	}
	value, found := m.tables[table][key]
	if !found {
		return nil, false, nil
	}
	return cloneBytes(value), true, nil
}

// GetAll returns a copy of every entry of table.
func (m *Memory) GetAll(ctx context.Context, table string) (map[string][]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.usable(ctx); err != nil {
		return nil, err
	}
	entries := make(map[string][]byte, len(m.tables[table]))
	for key, value := range m.tables[table] {
		entries[key] = cloneBytes(value)
	}
	return entries, nil
}

// Put sets table[key] to a copy of value.
func (m *Memory) Put(ctx context.Context, table, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(ctx); err != nil {
		return err
	}
	m.put(table, key, value)
	return nil
}

// PutIfAbsent sets table[key] only when the key is absent.
func (m *Memory) PutIfAbsent(ctx context.Context, table, key string, value []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(ctx); err != nil {
		return false, err
	}
	if _, found := m.tables[table][key]; found {
		return false, nil
	}
	m.put(table, key, value)
	return true, nil
}

// Delete removes keys from table and counts the ones that existed.
func (m *Memory) Delete(ctx context.Context, table string, keys ...string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(ctx); err != nil {
		return 0, err
	}
	deleted := 0
	for _, key := range keys {
		if m.delete(table, key) {
			deleted++
		}
	}
	return deleted, nil
}

// Keys returns the sorted keys of table that start with prefix.
func (m *Memory) Keys(ctx context.Context, table, prefix string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.usable(ctx); err != nil {
		return nil, err
	}
	keys := []string{}
	for key := range m.tables[table] {
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// Apply checks every op before touching any table, so a bad op leaves the store as
// it was.
func (m *Memory) Apply(ctx context.Context, ops []Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(ctx); err != nil {
		return err
	}
	if err := validateOps(ops); err != nil {
		return err
	}
	for _, op := range ops {
		switch op.Kind {
		case OpPut:
			m.put(op.Table, op.Key, op.Value)
		case OpDelete:
			m.delete(op.Table, op.Key)
		}
	}
	return nil
}

// Increment keeps the counter as decimal text, as Redis's HINCRBY does, so a value
// reads the same whichever backend wrote it.
func (m *Memory) Increment(ctx context.Context, table, key string, delta int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.usable(ctx); err != nil {
		return 0, err
	}
	var current int64
	if stored, found := m.tables[table][key]; found {
		parsed, err := strconv.ParseInt(string(stored), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("increment %s[%q]: stored value %q is not an integer", table, key, stored)
		}
		current = parsed
	}
	if (delta > 0 && current > math.MaxInt64-delta) || (delta < 0 && current < math.MinInt64-delta) {
		return 0, fmt.Errorf("increment %s[%q]: %d%+d overflows int64", table, key, current, delta)
	}
	current += delta
	m.put(table, key, []byte(strconv.FormatInt(current, 10)))
	return current, nil
}

// Close drops every table; later calls return ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	m.tables = nil
	return nil
}

// put stores a copy of value. The caller holds m.mu for writing.
func (m *Memory) put(table, key string, value []byte) {
	entries, found := m.tables[table]
	if !found {
		entries = make(map[string][]byte)
		m.tables[table] = entries
	}
	entries[key] = cloneBytes(value)
}

// delete removes table[key] and reports whether it existed. An emptied table is
// dropped, as Redis drops an emptied hash. The caller holds m.mu for writing.
func (m *Memory) delete(table, key string) bool {
	entries := m.tables[table]
	if _, found := entries[key]; !found {
		return false
	}
	delete(entries, key)
	if len(entries) == 0 {
		delete(m.tables, table)
	}
	return true
}

// validateOps rejects a batch that a backend could only half apply.
func validateOps(ops []Op) error {
	for i, op := range ops {
		if op.Kind != OpPut && op.Kind != OpDelete {
			return fmt.Errorf("apply op %d (%s[%q]): unknown kind %d", i, op.Table, op.Key, op.Kind)
		}
	}
	return nil
}

// cloneBytes returns a copy that is never nil, so a stored empty value reads back as
// found and empty on both backends.
func cloneBytes(b []byte) []byte {
	return append([]byte{}, b...)
}
