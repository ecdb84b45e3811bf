// Package storetest is the conformance suite every store.Store backend must pass, so
// the GCS behaves the same on the embedded store as on Redis.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/raygo-dev/raygo/gcs/store"
)

// Run runs the suite. newStore must return an empty store that no other subtest
// uses; the suite closes it when the subtest ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"PutOverwrites", testPutOverwrites},
		{"EmptyValue", testEmptyValue},
		{"GetAllUnknownTableIsEmpty", testGetAllUnknownTableIsEmpty},
		{"GetAll", testGetAll},
		{"TablesAreIndependent", testTablesAreIndependent},
		{"PutIfAbsent", testPutIfAbsent},
		{"DeleteCountsExistingKeys", testDeleteCountsExistingKeys},
		{"KeysByPrefixSorted", testKeysByPrefixSorted},
		{"ApplyAcrossTables", testApplyAcrossTables},
		{"ApplyRejectsUnknownKindWhole", testApplyRejectsUnknownKindWhole},
		{"ApplyIsAtomicToReaders", testApplyIsAtomicToReaders},
		{"Increment", testIncrement},
		{"IncrementNonInteger", testIncrementNonInteger},
		{"IncrementConcurrent", testIncrementConcurrent},
		{"ValuesAreCopies", testValuesAreCopies},
		{"BinaryKeysAndValues", testBinaryKeysAndValues},
		{"ErrClosedAfterClose", testErrClosedAfterClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				// ErrClosedAfterClose has closed it already.
				if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
					t.Errorf("close %s store: %v", s.Name(), err)
				}
			})
			tt.run(t, s)
		})
	}
}

func testGetMissing(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPut(t, s, "t", "present", "v")
	for _, tc := range []struct{ table, key string }{
		{"t", "absent"},
		{"unknown", "present"},
	} {
		value, found, err := s.Get(ctx, tc.table, tc.key)
		if err != nil || found || value != nil {
			t.Errorf("Get(%s, %q) = %q, %v, %v; want nil, false, nil", tc.table, tc.key, value, found, err)
		}
	}
}

func testPutGet(t *testing.T, s store.Store) {
	mustPut(t, s, "t", "k", "v")
	wantValue(t, s, "t", "k", "v")
}

func testPutOverwrites(t *testing.T, s store.Store) {
	mustPut(t, s, "t", "k", "first")
	mustPut(t, s, "t", "k", "second")
	wantValue(t, s, "t", "k", "second")
}

// An empty value is a value: the key must read back as found.
func testEmptyValue(t *testing.T, s store.Store) {
	for _, value := range [][]byte{nil, {}} {
		if err := s.Put(t.Context(), "t", "k", value); err != nil {
			t.Fatalf("Put(t, k, %#v): %v", value, err)
		}
		got, found, err := s.Get(t.Context(), "t", "k")
		if err != nil || !found || len(got) != 0 {
			t.Errorf("after Put(t, k, %#v): Get = %q, %v, %v; want empty, true, nil", value, got, found, err)
		}
	}
}

func testGetAllUnknownTableIsEmpty(t *testing.T, s store.Store) {
	all, err := s.GetAll(t.Context(), "unknown")
	if err != nil {
		t.Fatalf("GetAll(unknown): %v", err)
	}
	if all == nil || len(all) != 0 {
		t.Errorf("GetAll(unknown) = %#v; want an empty, non-nil map", all)
	}
}

func testGetAll(t *testing.T, s store.Store) {
	want := map[string]string{"a": "1", "b": "2", "c": "3"}
	for key, value := range want {
		mustPut(t, s, "t", key, value)
	}
	wantTable(t, s, "t", want)
}

func testTablesAreIndependent(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPut(t, s, store.TableNodes, "k", "node")
	mustPut(t, s, store.TableJobs, "k", "job")
	wantValue(t, s, store.TableNodes, "k", "node")
	wantValue(t, s, store.TableJobs, "k", "job")

	if _, err := s.Delete(ctx, store.TableNodes, "k"); err != nil {
		t.Fatalf("Delete(nodes, k): %v", err)
	}
	wantTable(t, s, store.TableNodes, map[string]string{})
	wantTable(t, s, store.TableJobs, map[string]string{"k": "job"})
}

func testPutIfAbsent(t *testing.T, s store.Store) {
	ctx := t.Context()
	steps := []struct {
		value     string
		wantAdded bool
	}{
		{"first", true},
		{"second", false},
	}
	for _, step := range steps {
		added, err := s.PutIfAbsent(ctx, "t", "k", []byte(step.value))
		if err != nil {
			t.Fatalf("PutIfAbsent(t, k, %q): %v", step.value, err)
		}
		if added != step.wantAdded {
			t.Errorf("PutIfAbsent(t, k, %q) added = %v; want %v", step.value, added, step.wantAdded)
		}
	}
	wantValue(t, s, "t", "k", "first")
}

func testDeleteCountsExistingKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPut(t, s, "t", "a", "1")
	mustPut(t, s, "t", "b", "2")
	mustPut(t, s, "t", "c", "3")
	steps := []struct {
		table       string
		keys        []string
		wantDeleted int
	}{
		{"t", nil, 0},
		{"t", []string{"missing"}, 0},
		{"unknown", []string{"a"}, 0},
		{"t", []string{"a", "missing", "b"}, 2},
		{"t", []string{"a", "b"}, 0},
		{"t", []string{"c", "c"}, 1},
	}
	for _, step := range steps {
		deleted, err := s.Delete(ctx, step.table, step.keys...)
		if err != nil {
			t.Fatalf("Delete(%s, %q): %v", step.table, step.keys, err)
		}
		if deleted != step.wantDeleted {
			t.Errorf("Delete(%s, %q) = %d; want %d", step.table, step.keys, deleted, step.wantDeleted)
		}
	}
	wantTable(t, s, "t", map[string]string{})
}

func testKeysByPrefixSorted(t *testing.T, s store.Store) {
	// Written out of order, with glob characters, to catch a backend that relies on
	// insertion order or on pattern matching.
	for _, key := range []string{"node:3", "node:1", "job:1", "node:10", "node:2", "no", "n*de", "[node", ""} {
		mustPut(t, s, "t", key, "v")
	}
	cases := []struct {
		table, prefix string
		want          []string
	}{
		{"t", "node:", []string{"node:1", "node:10", "node:2", "node:3"}},
		{"t", "job:", []string{"job:1"}},
		{"t", "n*", []string{"n*de"}},
		{"t", "[", []string{"[node"}},
		{"t", "absent", []string{}},
		{"t", "", []string{"", "[node", "job:1", "n*de", "no", "node:1", "node:10", "node:2", "node:3"}},
		{"unknown", "", []string{}},
	}
	for _, tc := range cases {
		keys, err := s.Keys(t.Context(), tc.table, tc.prefix)
		if err != nil {
			t.Fatalf("Keys(%s, %q): %v", tc.table, tc.prefix, err)
		}
		if !slices.Equal(keys, tc.want) {
			t.Errorf("Keys(%s, %q) = %q; want %q", tc.table, tc.prefix, keys, tc.want)
		}
	}
}

func testApplyAcrossTables(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPut(t, s, store.TableNodes, "stale", "x")
	mustPut(t, s, store.TableJobs, "done", "x")
	ops := []store.Op{
		{Kind: store.OpPut, Table: store.TableNodes, Key: "n1", Value: []byte("alive")},
		{Kind: store.OpDelete, Table: store.TableNodes, Key: "stale"},
		{Kind: store.OpPut, Table: store.TableJobs, Key: "j1", Value: []byte("running")},
		{Kind: store.OpDelete, Table: store.TableJobs, Key: "done"},
		{Kind: store.OpDelete, Table: store.TableJobs, Key: "never-existed"},
		// Later ops see earlier ones: the put wins over the delete before it.
		{Kind: store.OpDelete, Table: store.TableMeta, Key: "epoch"},
		{Kind: store.OpPut, Table: store.TableMeta, Key: "epoch", Value: []byte("7")},
	}
	if err := s.Apply(ctx, ops); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	wantTable(t, s, store.TableNodes, map[string]string{"n1": "alive"})
	wantTable(t, s, store.TableJobs, map[string]string{"j1": "running"})
	wantTable(t, s, store.TableMeta, map[string]string{"epoch": "7"})

	if err := s.Apply(ctx, nil); err != nil {
		t.Errorf("Apply(nil) = %v; want nil", err)
	}
}

func testApplyRejectsUnknownKindWhole(t *testing.T, s store.Store) {
	mustPut(t, s, "t", "k", "before")
	ops := []store.Op{
		{Kind: store.OpPut, Table: "t", Key: "k", Value: []byte("after")},
		{Kind: store.OpKind(99), Table: "t", Key: "bad"},
	}
	if err := s.Apply(t.Context(), ops); err == nil {
		t.Fatal("Apply with an unknown op kind = nil; want an error")
	}
	wantValue(t, s, "t", "k", "before")
}

// testApplyIsAtomicToReaders runs batches against a reader that checks, in every
// snapshot it takes, invariants that only a half-applied batch could break.
//
// Batch i sets a[x] = a[y] = i, moves a's one "gen-" key from gen-(i-1) to gen-i,
// and sets b[x] = i. A reader of a (one GetAll, which is a snapshot) must see x == y
// and exactly gen-x. A reader of a then b must see b[x] >= a[x]: once batch i is
// visible in a it is visible in b, even where a backend writes a before b.
func testApplyIsAtomicToReaders(t *testing.T, s store.Store) {
	const batches = 200
	ctx := t.Context()
	if err := s.Apply(ctx, atomicityBatch(0)); err != nil {
		t.Fatalf("Apply(batch 0): %v", err)
	}

	writerDone := make(chan error, 1)
	go func() {
		for i := 1; i <= batches; i++ {
			if err := s.Apply(ctx, atomicityBatch(i)); err != nil {
				writerDone <- fmt.Errorf("Apply(batch %d): %w", i, err)
				return
			}
		}
		writerDone <- nil
	}()

	// Snapshot first, then look at the writer: every pass takes a snapshot, however
	// fast the writer is on a loaded machine.
	for snapshots := 1; ; snapshots++ {
		if err := checkAtomicitySnapshot(ctx, s); err != nil {
			// Let the writer finish before the store is closed under it.
			<-writerDone
			t.Fatalf("snapshot %d: %v", snapshots, err)
		}
		select {
		case err := <-writerDone:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
	}
}

func atomicityBatch(i int) []store.Op {
	value := []byte(strconv.Itoa(i))
	return []store.Op{
		{Kind: store.OpPut, Table: "a", Key: "x", Value: value},
		{Kind: store.OpDelete, Table: "a", Key: "gen-" + strconv.Itoa(i-1)},
		{Kind: store.OpPut, Table: "a", Key: "gen-" + strconv.Itoa(i), Value: value},
		{Kind: store.OpPut, Table: "a", Key: "y", Value: value},
		{Kind: store.OpPut, Table: "b", Key: "x", Value: value},
	}
}

func checkAtomicitySnapshot(ctx context.Context, s store.Store) error {
	a, err := s.GetAll(ctx, "a")
	if err != nil {
		return fmt.Errorf("GetAll(a): %w", err)
	}
	if len(a) != 3 || !bytes.Equal(a["x"], a["y"]) || a["gen-"+string(a["x"])] == nil {
		return fmt.Errorf("table a shows a half-applied batch: %q", a)
	}
	b, found, err := s.Get(ctx, "b", "x")
	if err != nil || !found {
		return fmt.Errorf("Get(b, x) = %q, %v, %v; want a value", b, found, err)
	}
	aBatch, _ := strconv.Atoi(string(a["x"]))
	bBatch, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("b[x] = %q: %w", b, err)
	}
	if bBatch < aBatch {
		return fmt.Errorf("a shows batch %d but b, read later, shows batch %d", aBatch, bBatch)
	}
	return nil
}

func testIncrement(t *testing.T, s store.Store) {
	ctx := t.Context()
	steps := []struct {
		delta, want int64
	}{
		{1, 1},
		{1, 2},
		{5, 7},
		{-10, -3},
		{0, -3},
	}
	for _, step := range steps {
		got, err := s.Increment(ctx, store.TableMeta, "epoch", step.delta)
		if err != nil {
			t.Fatalf("Increment(meta, epoch, %d): %v", step.delta, err)
		}
		if got != step.want {
			t.Errorf("Increment(meta, epoch, %d) = %d; want %d", step.delta, got, step.want)
		}
	}
	// Both backends keep counters as decimal text, so a counter written by one reads
	// the same from the other.
	wantValue(t, s, store.TableMeta, "epoch", "-3")
}

func testIncrementNonInteger(t *testing.T, s store.Store) {
	mustPut(t, s, "t", "k", "not a number")
	if got, err := s.Increment(t.Context(), "t", "k", 1); err == nil {
		t.Fatalf("Increment of a non-integer = %d, nil; want an error", got)
	}
	wantValue(t, s, "t", "k", "not a number")
}

func testIncrementConcurrent(t *testing.T, s store.Store) {
	const goroutines, increments = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range increments {
				if _, err := s.Increment(t.Context(), "t", "counter", 1); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Increment: %v", err)
	}
	wantValue(t, s, "t", "counter", strconv.Itoa(goroutines*increments))
}

func testValuesAreCopies(t *testing.T, s store.Store) {
	ctx := t.Context()
	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'X'
		}
	}

	value := []byte("put")
	if err := s.Put(ctx, "t", "put", value); err != nil {
		t.Fatalf("Put: %v", err)
	}
	scribble(value)

	value = []byte("absent")
	if _, err := s.PutIfAbsent(ctx, "t", "absent", value); err != nil {
		t.Fatalf("PutIfAbsent: %v", err)
	}
	scribble(value)

	value = []byte("apply")
	if err := s.Apply(ctx, []store.Op{{Kind: store.OpPut, Table: "t", Key: "apply", Value: value}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	scribble(value)

	got, _, err := s.Get(ctx, "t", "put")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	scribble(got)
	all, err := s.GetAll(ctx, "t")
	if err != nil {
		t.Fatalf("GetAll: %v", err)
	}
	for _, v := range all {
		scribble(v)
	}

	wantTable(t, s, "t", map[string]string{"put": "put", "absent": "absent", "apply": "apply"})
}

func testBinaryKeysAndValues(t *testing.T, s store.Store) {
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	cases := []struct {
		name       string
		key, value string
	}{
		{"nul", "a\x00b", "\x00"},
		{"crlf", "line\r\nbreak", "\r\n$3\r\nfoo\r\n"},
		{"every byte", string(allBytes), string(allBytes)},
		{"invalid utf-8", "\xff\xfe", "\xc3\x28"},
	}
	want := map[string]string{}
	for _, tc := range cases {
		mustPut(t, s, "t", tc.key, tc.value)
		wantValue(t, s, "t", tc.key, tc.value)
		want[tc.key] = tc.value
	}
	wantTable(t, s, "t", want)

	keys, err := s.Keys(t.Context(), "t", "a\x00")
	if err != nil || !slices.Equal(keys, []string{"a\x00b"}) {
		t.Errorf(`Keys(t, "a\x00") = %q, %v; want ["a\x00b"]`, keys, err)
	}
	deleted, err := s.Delete(t.Context(), "t", "a\x00b", "a")
	if err != nil || deleted != 1 {
		t.Errorf(`Delete(t, "a\x00b", "a") = %d, %v; want 1, nil`, deleted, err)
	}
}

func testErrClosedAfterClose(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPut(t, s, "t", "k", "v")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, _, err := s.Get(ctx, "t", "k"); return err }},
		{"GetAll", func() error { _, err := s.GetAll(ctx, "t"); return err }},
		{"Put", func() error { return s.Put(ctx, "t", "k", []byte("v")) }},
		{"PutIfAbsent", func() error { _, err := s.PutIfAbsent(ctx, "t", "new", []byte("v")); return err }},
		{"Delete", func() error { _, err := s.Delete(ctx, "t", "k"); return err }},
		{"Keys", func() error { _, err := s.Keys(ctx, "t", ""); return err }},
		{"Apply", func() error {
			return s.Apply(ctx, []store.Op{{Kind: store.OpPut, Table: "t", Key: "k", Value: []byte("v")}})
		}},
		{"Increment", func() error { _, err := s.Increment(ctx, "t", "n", 1); return err }},
		{"Close", s.Close},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", c.name, err)
		}
	}
}

func mustPut(t *testing.T, s store.Store, table, key, value string) {
	t.Helper()
	if err := s.Put(t.Context(), table, key, []byte(value)); err != nil {
		t.Fatalf("Put(%s, %q, %q): %v", table, key, value, err)
	}
}

func wantValue(t *testing.T, s store.Store, table, key, want string) {
	t.Helper()
	got, found, err := s.Get(t.Context(), table, key)
	if err != nil {
		t.Fatalf("Get(%s, %q): %v", table, key, err)
	}
	if !found || string(got) != want {
		t.Errorf("Get(%s, %q) = %q, found %v; want %q", table, key, got, found, want)
	}
}

func wantTable(t *testing.T, s store.Store, table string, want map[string]string) {
	t.Helper()
	all, err := s.GetAll(t.Context(), table)
	if err != nil {
		t.Fatalf("GetAll(%s): %v", table, err)
	}
	got := make(map[string]string, len(all))
	for key, value := range all {
		got[key] = string(value)
	}
	if !maps.Equal(got, want) {
		t.Errorf("GetAll(%s) = %q; want %q", table, got, want)
	}
}
