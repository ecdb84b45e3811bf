package gcs

import (
	"context"
	"sync"
	"time"
)

// createOrderWait bounds how long a numbered create waits for the ones numbered before
// it (a client that died between numbering and sending a create leaves a gap).
const createOrderWait = time.Second

// createOrder registers each job's numbered creates (CreatePlacementGroupRequest.client_seq)
// in the order its client numbered them: the client sends them without waiting for each
// other's answers, so they may arrive, or reach the manager's lock, out of order.
// Guarded by its own mutex, never held with pgManager.mu.
type createOrder struct {
	mu   sync.Mutex
	jobs map[string]*jobCreates
}

// jobCreates is one job's place in its numbered creates.
type jobCreates struct {
	next    int64         // the number registered next; numbers start at 1
	changed chan struct{} // closed (and replaced) whenever next moves
}

func (o *createOrder) jobLocked(job string) *jobCreates {
	j := o.jobs[job]
	if j == nil {
		if o.jobs == nil {
			o.jobs = map[string]*jobCreates{}
		}
		j = &jobCreates{next: 1, changed: make(chan struct{})}
		o.jobs[job] = j
	}
	return j
}

// await returns once seq is the job's next create (or one numbered after it already
// went), or createOrderWait passed, or ctx ended; it reports the number it waited for
// when it stopped waiting for it (0 when it did not).
func (o *createOrder) await(ctx context.Context, job string, seq int64) (gap int64) {
	var timeout <-chan time.Time
	for {
		o.mu.Lock()
		j := o.jobLocked(job)
		if seq <= j.next {
			o.mu.Unlock()
			return 0
		}
		changed, next := j.changed, j.next
		o.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(createOrderWait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-timeout:
			return next
		case <-ctx.Done():
			return next
		}
	}
}

// done records that the create numbered seq was registered or refused: the ones after
// it may go.
func (o *createOrder) done(job string, seq int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	j := o.jobLocked(job)
	if seq >= j.next {
		j.next = seq + 1
		close(j.changed)
		j.changed = make(chan struct{})
	}
}

// forget drops a finished job's place.
func (o *createOrder) forget(job string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.jobs, job)
}
