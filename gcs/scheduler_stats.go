package gcs

import (
	"sync"
	"time"
)

// SchedulerRound is one finished round of the placement-group scheduler.
type SchedulerRound struct {
	// Start is when the round began; Took how long it ran (deciding and starting the
	// two-phase commits, not waiting for the raylets).
	Start time.Time
	Took  time.Duration
	// Attempts is how many placement decisions the round made.
	Attempts int
}

// roundHistory keeps the scheduler's last rounds for benchmarks and metrics. It changes
// nothing the scheduler does.
type roundHistory struct {
	mu     sync.Mutex
	total  int64
	recent []SchedulerRound // the last maxRecentRounds, oldest first
}

const maxRecentRounds = 256

func (h *roundHistory) add(r SchedulerRound) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total++
	if len(h.recent) == maxRecentRounds {
		copy(h.recent, h.recent[1:])
		h.recent = h.recent[:maxRecentRounds-1]
	}
	h.recent = append(h.recent, r)
}

// SchedulerRounds returns how many scheduling rounds have finished since the GCS
// started, and the last of them (at most 256), oldest first.
func (s *Server) SchedulerRounds() (total int64, recent []SchedulerRound) {
	h := &s.pgs.rounds
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, append([]SchedulerRound(nil), h.recent...)
}
