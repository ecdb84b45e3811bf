package raylet

import (
	"context"
	"fmt"
	"time"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// How workers end: killed on purpose (KillWorker, a finished job, a released bundle,
// idleness, Stop) or on their own; either way the death watch releases the lease, and
// the GCS hears of a lease holder's death.

func (r *Raylet) killWorker(w *worker, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killWorkerLocked(w, reason)
}

// killWorkerLocked SIGKILLs a worker, releases its lease at once and drops it from the
// pool; its death watch then reports the exit as intentional ("killed: reason"). The
// state is left as it was, so the watch knows whether a lease holder died.
func (r *Raylet) killWorkerLocked(w *worker, reason string) {
	if w.killReason == "" {
		w.killReason = reason
	}
	r.releaseWorkerLeaseLocked(w)
	if r.workers[w.id] == w {
		delete(r.workers, w.id)
	}
	if w.process != nil {
		_ = w.process.Kill()
	}
}

func (r *Raylet) releaseWorkerLeaseLocked(w *worker) {
	if w.lease == nil {
		return
	}
	r.bundles.releaseLease(w.lease)
	w.lease = nil
	r.resourcesChangedLocked()
}

// watchWorker waits for the worker process to exit, for whatever reason, then releases
// its lease, drops it from the pool and, if a lease holder died, tells the GCS (which
// restarts or buries the actor it ran).
func (r *Raylet) watchWorker(w *worker) {
	err := w.cmd.Wait()
	detail := fmt.Sprint(err)
	if w.cmd.ProcessState != nil {
		detail = w.cmd.ProcessState.String() // "exit status 2", "signal: killed"
	}
	r.mu.Lock()
	intentional := w.killReason != ""
	if intentional {
		detail = "killed: " + w.killReason
	}
	leased := w.state == workerLeased
	r.releaseWorkerLeaseLocked(w)
	if r.workers[w.id] == w {
		delete(r.workers, w.id)
	}
	w.exitDetail = detail
	actorID := w.actorID
	r.mu.Unlock()
	close(w.exited)

	r.log.Info().Str("worker_id", w.id).Int("pid", w.process.Pid).Str("job_id", w.key.jobID).Str("actor_id", actorID).
		Str("exit_detail", detail).Bool("intentional", intentional).Msg("worker exited")
	if leased {
		r.reportWorkerFailure(&pb.ReportWorkerFailureRequest{
			NodeId: r.cfg.NodeID, WorkerId: w.id, ActorId: actorID, ExitDetail: detail, Intentional: intentional,
		})
	}
}

// reportWorkerFailure tells the GCS, retrying with backoff while it is unreachable (a
// missed report would leave the actor ALIVE on a dead worker) until it answers or the
// raylet stops: the GCS then learns of the whole node's end instead.
func (r *Raylet) reportWorkerFailure(req *pb.ReportWorkerFailureRequest) {
	backoff := rpcutil.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for attempt := 1; ; attempt++ {
		select {
		case <-r.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.actors.ReportWorkerFailure(ctx, req)
		cancel()
		if !rpcutil.IsUnavailable(err) {
			if err != nil {
				r.log.Warn().Err(err).Str("worker_id", req.WorkerId).Str("actor_id", req.ActorId).Msg("the GCS refused a worker failure report")
			}
			return
		}
		if attempt == 1 {
			r.log.Warn().Err(err).Str("worker_id", req.WorkerId).Str("actor_id", req.ActorId).Msg("could not report a worker failure to the GCS; retrying")
		}
		select {
		case <-r.stop:
			return
		case <-time.After(backoff.Next()):
		}
	}
}

// idleWorkerLoop kills workers idle for IdleWorkerTimeout, until Stop.
func (r *Raylet) idleWorkerLoop() {
	r.everyFractionOf(r.cfg.IdleWorkerTimeout, func(now time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, w := range r.workers {
			if w.state == workerIdle && now.Sub(w.idleSince) >= r.cfg.IdleWorkerTimeout {
				r.killWorkerLocked(w, "idle for "+r.cfg.IdleWorkerTimeout.String())
			}
		}
	})
}

// killOrphanedWorkersLocked kills the workers leased from bundles no longer held, and
// the idle workers started for them (their environment names the old bundle and its
// GPUs). Bundle changes call it under mu, so no worker outlives its bundle.
func (r *Raylet) killOrphanedWorkersLocked(reason string) {
	for _, w := range r.workers {
		if w.lease != nil && r.bundles.orphaned(w.lease) || !r.bundles.holds(w.bundle, w.bundleHolder) {
			r.killWorkerLocked(w, reason)
		}
	}
}

// stopWorkers kills every worker and waits (bounded) for them to exit.
func (r *Raylet) stopWorkers() {
	r.mu.Lock()
	var exits []chan struct{}
	for _, w := range r.workers {
		r.killWorkerLocked(w, "raylet stopped")
		if w.process != nil { // a worker still starting is killed once it started
			exits = append(exits, w.exited)
		}
	}
	r.mu.Unlock()
	deadline := time.After(5 * time.Second)
	for _, exited := range exits {
		select {
		case <-exited:
		case <-deadline:
			return
		}
	}
}

// killJobWorkers kills the workers of a finished job, except those of detached actors,
// and returns how many it killed.
func (r *Raylet) killJobWorkers(jobID string) (int32, error) {
	if jobID == "" {
		return 0, fielderr.New(ErrRequired, "job_id", "required")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	killed := int32(0)
	for _, w := range r.workers {
		if w.key.jobID == jobID && !w.detached {
			r.killWorkerLocked(w, "job "+jobID+" finished")
			killed++
		}
	}
	return killed, nil
}

// returnWorkerLocked ends a worker's lease. The worker goes idle for reuse unless the
// caller disconnects it or it ran an actor (an actor's worker is never reused). Its end
// is no failure: the caller returned it, so nothing is reported to the GCS.
func (r *Raylet) returnWorkerLocked(w *worker, disconnect bool) {
	wasActor := w.actorID != ""
	r.releaseWorkerLeaseLocked(w)
	w.state, w.actorID, w.detached, w.idleSince = workerIdle, "", false, time.Now()
	switch {
	case disconnect:
		r.killWorkerLocked(w, "returned with disconnect")
	case wasActor:
		r.killWorkerLocked(w, "actor worker returned")
	}
}
