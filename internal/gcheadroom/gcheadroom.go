// Package gcheadroom lets a daemon's Go heap grow by a fixed headroom over its live heap
// before the garbage collector runs, where Go's default (GOGC=100: collect at twice the
// live heap) would collect a small heap every few hundred requests. Above the headroom's
// size the default applies again, so a large heap never grows more than Go lets it.
package gcheadroom

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultHeadroom is the growth the GCS and raylet allow their heap before a collection:
// 64 MiB.
const DefaultHeadroom = 64 << 20

// maxPercent bounds the GC percent on a nearly empty heap.
const maxPercent = 10_000

// Percent is the GC percent (GOGC) that lets a heap of live bytes grow by headroom
// bytes before the next collection: Go's default 100 once the live heap is at least the
// headroom.
func Percent(live, headroom uint64) int {
	if live == 0 {
		return maxPercent
	}
	percent := headroom * 100 / live
	switch {
	case percent < 100:
		return 100
	case percent > maxPercent:
		return maxPercent
	}
	return int(percent)
}

// Keep sets the GC percent from the live heap now and every second until ctx ends,
// unless the GOGC environment variable chooses it.
func Keep(ctx context.Context, headroom uint64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := -1
	adjust := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if percent := Percent(sample[0].Value.Uint64(), headroom); percent != current {
			debug.SetGCPercent(percent)
			current = percent
		}
	}
	adjust()
	go func() {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				adjust()
			}
		}
	}()
}
