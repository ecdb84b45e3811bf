// Package gcheadroom lets a daemon's small Go heap grow by more than Go's default before
// the garbage collector runs (GOGC=100: collect at twice the live heap, which collects a
// heap of a few MiB every few hundred requests): by up to four times its live size, and
// by at most a fixed headroom. From the headroom's size on the default applies, so a
// large heap never grows more than Go lets it.
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

// maxPercent bounds the GC percent of a small heap: it grows by at most four times its
// live size. The percent applies to the heap live at the next collection, which may have
// grown since it was set (it is set once a second): a bound relative to the live heap
// keeps the heap's peak proportional to it.
const maxPercent = 400

// Percent is the GC percent (GOGC) that lets a heap of live bytes grow by headroom
// bytes before the next collection, but by at most four times its size: Go's default
// 100 once the live heap is at least the headroom.
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
