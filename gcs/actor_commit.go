package gcs

// The actor manager's commit side: leasing a worker and running the constructor
// (place), marking an actor ALIVE, restarts and deaths (workerLostLocked, buryLocked and
// the node, group and job hooks), reconciling a reconnected raylet's workers, and
// killing workers.

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// place runs one attempt: lease a worker from the first target that grants one, run the
// constructor on it, and record the outcome unless the attempt was superseded meanwhile
// (then the worker is killed).
func (m *actorManager) place(e *actorEntry, attempt int64, targets []leaseTarget, lease *pb.RequestWorkerLeaseRequest, create *pb.CreateActorOnWorkerRequest) {
	log := m.log.With().Str("actor_id", create.ActorId).Str("job_id", lease.JobId).Logger()
	var worker *pb.WorkerInfo
	var target leaseTarget
	var refusals []string
	invalid := 0
	for _, t := range targets {
		w, err := m.requestLease(t, lease)
		if err == nil {
			worker, target = w, t
			break
		}
		if m.ctx.Err() != nil {
			return // stopping: the next GCS schedules it again
		}
		refusals = append(refusals, fmt.Sprintf("node %s: %s", t.NodeID, status.Convert(err).Message()))
		if status.Code(err) == codes.InvalidArgument {
			invalid++
		}
		log.Debug().Err(err).Str("node_id", t.NodeID).Msg("worker lease refused")
	}

	m.mu.Lock()
	current := e.attempt == attempt && e.pending()
	if worker == nil {
		if current {
			e.placing = false
			if invalid == len(targets) {
				m.buryLocked(e, "cannot be scheduled: "+strings.Join(refusals, "; "))
			} else {
				m.waitLocked(e, "no worker lease yet: "+strings.Join(refusals, "; "), m.now())
			}
		}
		m.mu.Unlock()
		return
	}
	if worker.NodeId == "" {
		worker.NodeId = target.NodeID
	}
	if !current {
		m.mu.Unlock()
		m.killWorker(worker.NodeId, worker.WorkerId, "actor creation superseded")
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	e.creating, e.cancelCreate = worker, cancel
	m.mu.Unlock()

	var reply *pb.CreateActorOnWorkerReply
	client, err := m.workerClient(worker.Address, worker.WorkerId)
	if err == nil && create.PythonClassKey != "" && m.gcsCredentialSHA256 != "" {
		create, err = m.withPythonClass(ctx, create)
	}
	if err == nil {
		reply, err = client.CreateActor(ctx, create)
	}
	if err != nil && ctx.Err() == nil {
		// The worker likely died: give the raylet's report (which cancels ctx) a moment to
		// arrive, so the death cause carries its exit detail rather than a broken call.
		select {
		case <-ctx.Done():
		case <-time.After(workerReportGrace):
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if e.attempt != attempt || !e.pending() {
		m.closeWorkerConn(worker.Address)
		m.killWorker(worker.NodeId, worker.WorkerId, "actor creation superseded")
		return
	}
	if m.ctx.Err() != nil {
		return // stopping: the next GCS kills the orphan and schedules the actor again
	}
	lost := e.creatingLost
	e.placing, e.creating, e.cancelCreate, e.creatingLost = false, nil, nil, ""
	switch {
	case err != nil || lost != "": // lost: the worker died even if its reply made it out
		m.closeWorkerConn(worker.Address)
		m.killWorker(worker.NodeId, worker.WorkerId, "actor constructor call failed")
		if lost == "" {
			lost = fmt.Sprintf("worker exited (CreateActor on %s: %s)", worker.Address, status.Convert(err).Message())
		}
		m.workerLostLocked(e, lost)
	case reply.Error != nil:
		m.closeWorkerConn(worker.Address)
		cause := fmt.Sprintf("constructor failed: %s: %s", reply.Error.Type, reply.Error.Message)
		m.killWorker(worker.NodeId, worker.WorkerId, cause)
		// Where it died stays listed, as for any dead actor.
		e.info.NodeId, e.info.WorkerId, e.info.Pid = worker.NodeId, worker.WorkerId, cmp.Or(reply.Pid, worker.Pid)
		m.buryLocked(e, cause)
	default:
		if err := m.markAliveLocked(e, worker, reply.Pid); err != nil {
			// Nobody may learn of a worker the table does not hold: a GCS restarted now
			// would create the actor again, and callers would follow the wrong one.
			m.closeWorkerConn(worker.Address)
			m.killWorker(worker.NodeId, worker.WorkerId, "the actor's ALIVE row could not be saved")
			m.waitLocked(e, "its ALIVE row could not be saved: "+err.Error(), m.now())
			return
		}
		log.Info().Str("node_id", worker.NodeId).Str("worker_id", worker.WorkerId).Str("pg_id", worker.PlacementGroupId).
			Int32("bundle", worker.BundleIndex).Msg("actor ALIVE")
	}
}

// requestLease asks one raylet for a dedicated worker.
func (m *actorManager) requestLease(t leaseTarget, lease *pb.RequestWorkerLeaseRequest) (*pb.WorkerInfo, error) {
	client, err := m.nodes.rayletClient(t.NodeID)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	req := proto.Clone(lease).(*pb.RequestWorkerLeaseRequest)
	req.BundleIndex = t.BundleIndex
	ctx, cancel := context.WithTimeout(m.ctx, actorLeaseTimeout)
	defer cancel()
	reply, err := client.RequestWorkerLease(ctx, req)
	if err != nil {
		return nil, err
	}
	m.nodes.applyResourceReport(t.NodeID, reply.Resources)
	if reply.Worker == nil || reply.Worker.WorkerId == "" || reply.Worker.Address == "" {
		return nil, status.Errorf(codes.Internal, "raylet granted a lease without a worker id and address")
	}
	return reply.Worker, nil
}

// returnChargeLocked gives back the charge an actor's lease holds in its queue, if any:
// at the next round, which calls leases without mu.
func (m *actorManager) returnChargeLocked(e *actorEntry) {
	if e.info.Queue == "" {
		return
	}
	e.info.Queue = ""
	m.leaseReturns = append(m.leaseReturns, actorLeaseID(e.info.ActorId))
	m.retryAll.Store(true) // freed quota may admit an actor that waits for it
	m.kick()
}

// markAliveLocked records the worker an actor now runs on once that is saved; when it
// cannot be, it changes nothing and returns the error.
func (m *actorManager) markAliveLocked(e *actorEntry, worker *pb.WorkerInfo, pid int64) error {
	row := proto.Clone(e.info).(*pb.ActorInfo)
	row.State = pb.ActorState_ACTOR_ALIVE
	row.NodeId, row.Pid, row.WorkerId, row.Address = worker.NodeId, cmp.Or(pid, worker.Pid), worker.WorkerId, worker.Address
	row.GpuIds, row.CudaVisibleDevices = worker.GpuIds, worker.CudaVisibleDevices
	if worker.PlacementGroupId != "" {
		row.PlacementGroupId, row.BundleIndex = worker.PlacementGroupId, worker.BundleIndex
	} else {
		row.BundleIndex = e.requestedBundle()
	}
	row.PendingReason, row.PendingReasonCode = "", ""
	if err := m.saveRow(row); err != nil {
		return err
	}
	e.info = row
	e.retry.reset()
	e.notify()
	return nil
}

// workerLostLocked handles the loss of an actor's worker (exit, node death, a kill that
// allows a restart): RESTARTING when restarts are left, else DEAD.
func (m *actorManager) workerLostLocked(e *actorEntry, why string) {
	if e.info.MaxRestarts != -1 && e.info.NumRestarts >= e.info.MaxRestarts {
		m.buryLocked(e, fmt.Sprintf("%s; no restarts left (max_restarts=%d)", why, e.info.MaxRestarts))
		return
	}
	e.endAttemptLocked()
	m.closeWorkerConn(e.info.Address)
	e.info.State = pb.ActorState_ACTOR_RESTARTING
	e.info.NumRestarts++
	e.info.NodeId, e.info.Pid, e.info.WorkerId, e.info.Address = "", 0, "", ""
	e.info.GpuIds, e.info.CudaVisibleDevices = nil, ""
	e.info.BundleIndex = e.requestedBundle()
	m.returnChargeLocked(e) // the lease ended; the restart is admitted again
	e.info.PendingReason, e.info.PendingReasonCode = "restarting: "+why, ""
	e.retry.reset()
	m.logPersistError(m.persistLocked(e))
	e.notify()
	m.kick()
	m.log.Info().Str("actor_id", e.info.ActorId).Str("job_id", e.info.JobId).Int64("num_restarts", e.info.NumRestarts).
		Str("reason", why).Msg("actor RESTARTING")
}

// buryLocked makes an actor DEAD (once). The caller kills its worker if it has one
// (read it before: see currentWorkerLocked).
func (m *actorManager) buryLocked(e *actorEntry, cause string) {
	if e.dead() {
		return
	}
	row := m.deadRowLocked(e, cause)
	m.logPersistError(m.saveRow(row))
	m.buriedLocked(e, row)
}

// deadRowLocked is the actor's row as DEAD, the entry unchanged. node_id, worker_id and
// pid stay, to show where it last ran (Ray's state API does); the address goes, so that
// nobody calls a dead worker.
func (m *actorManager) deadRowLocked(e *actorEntry, cause string) *pb.ActorInfo {
	row := proto.Clone(e.info).(*pb.ActorInfo)
	row.Address = ""
	row.State = pb.ActorState_ACTOR_DEAD
	row.DeathCause = cause
	row.EndTimeMs = m.now().UnixMilli()
	row.PendingReason, row.PendingReasonCode = "", ""
	row.Queue = "" // buriedLocked returns the charge
	return row
}

// buriedLocked makes row, the actor's DEAD row (saved, or its failure logged), the
// entry's: its attempt ends, its name is free again and its waiters hear of it.
func (m *actorManager) buriedLocked(e *actorEntry, row *pb.ActorInfo) {
	m.returnChargeLocked(e)
	e.endAttemptLocked()
	m.closeWorkerConn(e.info.Address)
	e.info = row
	if e.info.Name != "" && m.names[nameKey(e.info.Namespace, e.info.Name)] == e.info.ActorId {
		delete(m.names, nameKey(e.info.Namespace, e.info.Name))
	}
	e.notify()
	m.log.Info().Str("actor_id", e.info.ActorId).Str("job_id", e.info.JobId).Str("node_id", e.info.NodeId).
		Str("death_cause", e.info.DeathCause).Msg("actor DEAD")
	m.freeDetachedClassLocked(row)
}

// freeDetachedClassLocked deletes the class of a dead detached Python actor from the KV
// when its job ended (the job's sweep kept it for the actor) and no live actor uses it.
// A job that ends later deletes it itself. The deletion runs in the background: mu is held.
func (m *actorManager) freeDetachedClassLocked(row *pb.ActorInfo) {
	key := row.PythonClassKey
	if m.freeFunctions == nil || !row.IsDetached || key == "" {
		return
	}
	if job := m.jobs.get(row.JobId); job != nil && !job.IsDead {
		return
	}
	if m.classKeysInUseLocked(row.JobId)[key] {
		return
	}
	go m.freeFunctions(key)
}

// classKeysInUse implements functionHolders.
func (m *actorManager) classKeysInUse(jobID string) map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.classKeysInUseLocked(jobID)
}

func (m *actorManager) classKeysInUseLocked(jobID string) map[string]bool {
	keys := map[string]bool{}
	for _, e := range m.actors {
		if e.info.JobId == jobID && e.info.IsDetached && e.info.PythonClassKey != "" && !e.dead() {
			keys[e.info.PythonClassKey] = true
		}
	}
	return keys
}

// onNodeDead restarts (or buries) the actors whose worker ran on a dead node.
func (m *actorManager) onNodeDead(nodeID string) {
	why := fmt.Sprintf("node %s died", nodeID)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.actors {
		switch {
		case e.info.State == pb.ActorState_ACTOR_ALIVE && e.info.NodeId == nodeID:
			m.workerLostLocked(e, why)
		case e.creating != nil && e.creating.NodeId == nodeID:
			e.creatingLost = why
			e.cancelCreate()
		}
	}
}

// onPlacementGroupRemoved buries the group's actors and kills their workers. The group
// manager calls it before it cancels the bundles, so the raylet's reports of the
// workers it kills with them are ignored.
func (m *actorManager) onPlacementGroupRemoved(pgID string) {
	m.buryWhere(deathGroupRemoved, func(e *actorEntry) bool { return e.info.SchedulingStrategy.GetPlacementGroupId() == pgID })
}

// onJobDead buries the job's non-detached actors, then has every raylet kill the job's
// remaining workers (its task workers), best effort.
func (m *actorManager) onJobDead(job *pb.JobInfo) {
	m.buryWhere(deathJobFinished, func(e *actorEntry) bool { return e.info.JobId == job.JobId && !e.info.IsDetached })
	for _, n := range m.nodes.aliveNodes() {
		go func() {
			client, err := m.nodes.rayletClient(n.NodeId)
			if err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(m.ctx, rayletCallTimeout)
			defer cancel()
			if _, err := client.KillJobWorkers(ctx, &pb.KillJobWorkersRequest{JobId: job.JobId}); err != nil {
				m.log.Debug().Err(err).Str("node_id", n.NodeId).Str("job_id", job.JobId).Msg("KillJobWorkers failed")
			}
		}()
	}
}

// buryWhere buries every live actor that match selects, then kills their workers.
func (m *actorManager) buryWhere(cause string, match func(*actorEntry) bool) {
	type worker struct{ node, id string }
	var kill []worker
	m.mu.Lock()
	for _, e := range m.actors {
		if e.dead() || !match(e) {
			continue
		}
		if node, id := m.currentWorkerLocked(e); id != "" {
			kill = append(kill, worker{node, id})
		}
		m.buryLocked(e, cause)
	}
	m.mu.Unlock()
	for _, w := range kill {
		m.killWorker(w.node, w.id, cause)
	}
}

// onNodeConnected reconciles the workers of a raylet that registered or reconnected:
// workers dedicated to actors that no longer run on them (left by an older GCS
// incarnation, or by a lease whose reply was lost) are killed, and ALIVE actors whose
// worker the raylet no longer has restart. A raylet without GetWorkers is skipped.
func (m *actorManager) onNodeConnected(node *pb.NodeInfo) {
	m.reconcileWorkers(node.NodeId)
}

// reconcileWorkers is one round of onNodeConnected. A worker of an actor that is being
// placed right now may be that placement's own: while there is one, the node is checked
// again every reconcileRetry, however long the placement takes (an executable to
// download, a slow constructor), until the node is gone or the GCS stops.
func (m *actorManager) reconcileWorkers(nodeID string) {
	type actorWorker struct{ actor, worker string }
	m.mu.Lock()
	var aliveHere []actorWorker
	for _, e := range m.actors {
		if e.info.State == pb.ActorState_ACTOR_ALIVE && e.info.NodeId == nodeID {
			aliveHere = append(aliveHere, actorWorker{e.info.ActorId, e.info.WorkerId})
		}
	}
	m.mu.Unlock()
	client, err := m.nodes.rayletClient(nodeID)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, rayletCallTimeout)
	defer cancel()
	reply, err := client.GetWorkers(ctx, &pb.GetWorkersRequest{})
	if err != nil {
		if status.Code(err) != codes.Unimplemented {
			m.log.Debug().Err(err).Str("node_id", nodeID).Msg("could not list the raylet's workers")
		}
		return
	}
	present := map[string]bool{}
	var orphans []*pb.WorkerInfo
	undecided := 0
	m.mu.Lock()
	for _, w := range reply.Workers {
		present[w.WorkerId] = true
		if w.ActorId == "" {
			continue
		}
		e := m.actors[w.ActorId]
		switch {
		case e == nil || e.dead():
			orphans = append(orphans, w)
		case e.info.State == pb.ActorState_ACTOR_ALIVE && e.info.WorkerId != w.WorkerId:
			orphans = append(orphans, w)
		case e.pending() && e.creating != nil && e.creating.WorkerId == w.WorkerId:
		case e.pending() && e.placing:
			undecided++
		case e.pending():
			orphans = append(orphans, w)
		}
	}
	for _, aw := range aliveHere {
		e := m.actors[aw.actor]
		if e != nil && e.info.State == pb.ActorState_ACTOR_ALIVE && e.info.WorkerId == aw.worker && !present[aw.worker] {
			m.workerLostLocked(e, fmt.Sprintf("worker exited (gone from node %s when it reconnected)", nodeID))
		}
	}
	m.mu.Unlock()
	for _, w := range orphans {
		m.log.Info().Str("node_id", nodeID).Str("worker_id", w.WorkerId).Str("actor_id", w.ActorId).Msg("killing an orphaned actor worker")
		m.killWorker(nodeID, w.WorkerId, "orphaned actor worker")
	}
	if undecided > 0 {
		time.AfterFunc(m.reconcileRetry, func() {
			if m.ctx.Err() == nil {
				m.reconcileWorkers(nodeID)
			}
		})
	}
}

// killWorker asks a raylet to kill a worker, in the background. While the raylet cannot
// be reached it retries with backoff, until the raylet answers, the node is no longer
// ALIVE (its workers died with it) or the GCS stops.
func (m *actorManager) killWorker(nodeID, workerID, reason string) {
	if nodeID == "" || workerID == "" {
		return
	}
	go func() {
		log := m.log.With().Str("node_id", nodeID).Str("worker_id", workerID).Logger()
		backoff := m.killRetry
		for {
			client, err := m.nodes.rayletClient(nodeID)
			if err != nil {
				log.Debug().Err(err).Msg("KillWorker not sent: the node is not ALIVE, its workers died with it")
				return
			}
			ctx, cancel := context.WithTimeout(m.ctx, rayletCallTimeout)
			reply, err := client.KillWorker(ctx, &pb.KillWorkerRequest{WorkerId: workerID, Reason: reason})
			cancel()
			switch {
			case err == nil:
				m.nodes.applyResourceReport(nodeID, reply.Resources)
				m.retryAllNow()
				return
			case m.ctx.Err() != nil:
				return // stopping
			case !rpcutil.IsUnavailable(err) && status.Code(err) != codes.Canceled:
				// Canceled: the node's connection closed under the call (it died); the
				// next round sees it.
				log.Warn().Err(err).Msg("KillWorker failed")
				return
			}
			wait := backoff.Next()
			log.Debug().Err(err).Dur("retry_in", wait).Msg("KillWorker failed; retrying")
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
}

// withPythonClass is create with the class its python_class_key names, read from the KV:
// with auth on, the worker may hold no token that reads it (a tenant's actor's), and the
// GCS's call carries none (auth.WorkerCredential).
func (m *actorManager) withPythonClass(ctx context.Context, create *pb.CreateActorOnWorkerRequest) (*pb.CreateActorOnWorkerRequest, error) {
	key, err := kvKey(functionKVNamespace, []byte(create.PythonClassKey))
	if err != nil {
		return nil, err
	}
	class, found, err := m.store.Get(ctx, store.TableKV, key)
	if err != nil {
		return nil, fmt.Errorf("read the actor's class %s: %w", create.PythonClassKey, err)
	}
	if !found {
		return nil, fmt.Errorf("the actor's class %s is not in the KV (its job ended?)", create.PythonClassKey)
	}
	withClass := proto.Clone(create).(*pb.CreateActorOnWorkerRequest)
	withClass.PythonClass = class
	return withClass, nil
}

// workerClient returns the CoreWorkerService client of a worker, from a cached connection
// to that worker (its calls carry auth.WorkerCredential of that worker's id).
func (m *actorManager) workerClient(address, workerID string) (pb.CoreWorkerServiceClient, error) {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if cached := m.workerConns[address]; cached.conn != nil {
		if cached.workerID == workerID {
			return pb.NewCoreWorkerServiceClient(cached.conn), nil
		}
		_ = cached.conn.Close() // another worker had that address before
		delete(m.workerConns, address)
	}
	var token string
	if m.gcsCredentialSHA256 != "" {
		token = auth.WorkerCredential(m.gcsCredentialSHA256, workerID)
	}
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{Token: token})
	if err != nil {
		return nil, err
	}
	m.workerConns[address] = workerConn{conn: conn, workerID: workerID}
	return pb.NewCoreWorkerServiceClient(conn), nil
}

func (m *actorManager) closeWorkerConn(address string) {
	if address == "" {
		return
	}
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if cached := m.workerConns[address]; cached.conn != nil {
		_ = cached.conn.Close()
		delete(m.workerConns, address)
	}
}
