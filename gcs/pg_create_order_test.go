package gcs

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// Numbered creates sent at once, started last number first, register in their numbers'
// order.
func TestNumberedCreatesRegisterInTheirOrder(t *testing.T) {
	var o createOrder
	var mu sync.Mutex
	var registered []int64
	var wg sync.WaitGroup
	const n = 20
	for seq := int64(n); seq >= 1; seq-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.await(context.Background(), "job", seq)
			mu.Lock()
			registered = append(registered, seq)
			mu.Unlock()
			o.done("job", seq)
		}()
	}
	wg.Wait()
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(registered, want) {
		t.Fatalf("registered in the order %v, want %v", registered, want)
	}
}

// A gap (a create numbered but never sent) holds the later ones back only until their
// wait ends; then they go, and so do earlier ones that come late. Another job, or the
// same job once forgotten, starts again at 1.
func TestANumberedCreateDoesNotWaitForeverForAGap(t *testing.T) {
	var o createOrder
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if gap := o.await(ended, "job", 5); gap != 1 { // 1 to 4 never come: it goes when its wait ends
		t.Fatalf("gap %d, want 1 (the create waited for)", gap)
	}
	o.done("job", 5)
	if gap := o.await(context.Background(), "job", 3); gap != 0 { // late: goes at once
		t.Fatalf("gap %d for a late create, want 0", gap)
	}
	o.done("job", 3)
	o.mu.Lock()
	next := o.jobs["job"].next
	o.mu.Unlock()
	if next != 6 {
		t.Fatalf("next %d after 5 and a late 3, want 6", next)
	}
	o.await(context.Background(), "other", 1)
	o.forget("job")
	o.await(context.Background(), "job", 1)
}
