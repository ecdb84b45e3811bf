package gcs

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
)

// What the managers share about their rows: writing one, retrying with backoff, and
// forgetting dead ones.

// putRow writes one protobuf row; what names it in errors ("placement group 3f…").
func putRow(st store.Store, table, key, what string, row proto.Message) error {
	raw, err := proto.Marshal(row)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	if err := st.Put(context.Background(), table, key, raw); err != nil {
		return fmt.Errorf("persist %s: %w", what, err)
	}
	return nil
}

// retryBackoff is when a row that could not be placed is tried again: after a delay
// that doubles from a minimum to a maximum, and from the minimum again after reset.
type retryBackoff struct {
	delay time.Duration // 0: not backing off
	next  time.Time     // zero: due now
}

// fail records a failed attempt at now and returns the new delay.
func (b *retryBackoff) fail(now time.Time, minDelay, maxDelay time.Duration) time.Duration {
	if b.delay == 0 {
		b.delay = minDelay
	} else {
		b.delay = min(2*b.delay, maxDelay)
	}
	b.next = now.Add(b.delay)
	return b.delay
}

// reset forgets the failures.
func (b *retryBackoff) reset() { *b = retryBackoff{} }

// deadRow is what pruning needs of a row that ended (a removed group, a dead actor).
type deadRow struct {
	ID        string
	EndTimeMs int64
}

// deadRowsToPrune returns the dead rows to forget: those that ended more than retention
// before nowMs, and the oldest ends beyond maxKept.
func deadRowsToPrune(dead []deadRow, nowMs int64, retention time.Duration, maxKept int) []string {
	sorted := append([]deadRow(nil), dead...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].EndTimeMs != sorted[j].EndTimeMs {
			return sorted[i].EndTimeMs < sorted[j].EndTimeMs
		}
		return sorted[i].ID < sorted[j].ID
	})
	cutoff := nowMs - retention.Milliseconds()
	var drop []string
	for i, d := range sorted {
		if len(sorted)-i > maxKept || d.EndTimeMs < cutoff {
			drop = append(drop, d.ID)
		}
	}
	return drop
}
