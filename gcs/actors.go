package gcs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Actor-manager settings.
const (
	// actorRetryBackoffMin/Max: an actor that found no worker is retried after a backoff
	// that doubles from Min to Max; a node joining, a raylet's resources changing or a
	// placement group becoming CREATED retries every pending actor at once.
	actorRetryBackoffMin = 50 * time.Millisecond
	actorRetryBackoffMax = time.Second
	// actorLeaseTimeout bounds one RequestWorkerLease: the raylet may have to fetch the
	// executable from the GCS and start a process before it answers.
	actorLeaseTimeout = 5 * time.Minute
	// workerReportGrace is how long a failed constructor call waits for the raylet's
	// report of its worker's exit.
	workerReportGrace = time.Second
	// reconcileRetry: how far apart a reconnected raylet's workers are checked again
	// while one of them may belong to a placement in flight.
	reconcileRetry = 2 * time.Second
	// killRetryMin/Max: a KillWorker the raylet could not be reached for is sent again
	// after a backoff that doubles from Min to Max.
	killRetryMin = 100 * time.Millisecond
	killRetryMax = 5 * time.Second
	// actorIDBytes: actor ids are 32 hex characters.
	actorIDBytes = 16
	// defaultNamespace is the namespace of a job that named none (see AddJob).
	defaultNamespace = "default"
)

// Scheduling strategy kinds (SchedulingStrategy.kind); "" means DEFAULT.
const (
	strategyDefault        = "DEFAULT"
	strategySpread         = "SPREAD"
	strategyPlacementGroup = "PLACEMENT_GROUP"
	strategyNodeAffinity   = "NODE_AFFINITY"
)

// Death causes recorded in ActorInfo.death_cause. Worker and node losses without
// restarts left read "<why>; no restarts left (max_restarts=N)", where why is
// "worker exited (<exit detail>)", "node <id> died" or deathKilled.
const (
	deathKilled       = "killed by KillActor"
	deathGroupRemoved = "placement group removed"
	deathJobFinished  = "the job that owns it finished"
)

// actorEntry is one actor in the manager. Guarded by actorManager.mu.
type actorEntry struct {
	info    *pb.ActorInfo // the persisted row
	request resources.Set // info.required_resources, parsed (constant)
	// changed is closed and replaced whenever the actor's state changes.
	changed chan struct{}
	// attempt grows with every scheduling attempt and with every change that ends one
	// (kill, restart, death): a lease or constructor that returns for an older attempt
	// gives its worker back instead of touching the actor.
	attempt int64
	// placing: a goroutine is leasing a worker or running the constructor for attempt.
	placing     bool
	nextAttempt time.Time
	backoff     time.Duration
	// creating is the worker running the constructor of the current attempt;
	// cancelCreate stops that call, and creatingLost says why its worker was lost.
	creating     *pb.WorkerInfo
	cancelCreate context.CancelFunc
	creatingLost string
}

func (e *actorEntry) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *actorEntry) pending() bool {
	return e.info.State == pb.ActorState_ACTOR_PENDING_CREATION || e.info.State == pb.ActorState_ACTOR_RESTARTING
}

func (e *actorEntry) dead() bool { return e.info.State == pb.ActorState_ACTOR_DEAD }

// requestedBundle is the bundle index the actor asked for (-1: none or any).
func (e *actorEntry) requestedBundle() int32 {
	if s := e.info.SchedulingStrategy; s.GetKind() == strategyPlacementGroup {
		return s.BundleIndex
	}
	return resources.AnyBundle
}

// endAttemptLocked invalidates the running attempt: its lease or constructor, when it
// returns, kills its worker.
func (e *actorEntry) endAttemptLocked() {
	e.attempt++
	if e.cancelCreate != nil {
		e.cancelCreate()
	}
	e.placing, e.creating, e.cancelCreate, e.creatingLost = false, nil, nil, ""
}

// actorManager is Ray's GCS actor manager: the actor table, scheduling through the
// raylets' worker leases, restarts and deaths.
//
// Concurrency: every field behind mu, except workerConns (connMu), lastPrune (the
// loop's), the lock-free retryAll/wake, and reconcileRetry/killRetry (constant once the
// server runs; tests shorten them before they make a node connect or a worker die). mu
// is never held while calling the node, job or placement-group managers' locking
// methods; they call the hooks here without holding their own locks, except
// retryAllNow, which takes no lock.
type actorManager struct {
	pb.UnimplementedActorInfoServiceServer
	server *Server
	// ctx ends when the server stops; every raylet and worker call runs under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	actors map[string]*actorEntry
	names  map[string]string // namespace \x00 name → id, non-DEAD actors only
	// lastPrune is when pruneDead last ran (the loop's own; it prunes once a second).
	lastPrune time.Time

	wake     chan struct{}
	retryAll atomic.Bool
	// spreadCursor is where the next SPREAD actor's round over the nodes starts.
	spreadCursor uint64

	// reconcileRetry and killRetry: the spacing of reconcile rounds and of KillWorker
	// retries (reconcileRetry and killRetryMin/Max).
	reconcileRetry time.Duration
	killRetry      rpcutil.Backoff

	connMu      sync.Mutex
	workerConns map[string]*grpc.ClientConn // worker address → connection
}

func newActorManager(s *Server) *actorManager {
	ctx, cancel := context.WithCancel(context.Background())
	return &actorManager{server: s, ctx: ctx, cancel: cancel, actors: map[string]*actorEntry{}, names: map[string]string{},
		wake: make(chan struct{}, 1), workerConns: map[string]*grpc.ClientConn{},
		reconcileRetry: reconcileRetry, killRetry: rpcutil.Backoff{Min: killRetryMin, Max: killRetryMax}}
}

// kick makes the scheduling loop run a round soon.
func (m *actorManager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// retryAllNow is called when capacity may have appeared (a node joined, a raylet's
// resources changed, a placement group became CREATED): the next round ignores backoff.
// It takes no lock, so other managers may call it holding theirs.
func (m *actorManager) retryAllNow() {
	m.retryAll.Store(true)
	m.kick()
}

func (m *actorManager) close() {
	m.cancel()
	m.connMu.Lock()
	defer m.connMu.Unlock()
	for addr, conn := range m.workerConns {
		_ = conn.Close()
		delete(m.workerConns, addr)
	}
}

// persistLocked writes an actor's row. Callers hold mu, so rows reach the store in the
// order the state changed.
func (m *actorManager) persistLocked(e *actorEntry) error {
	raw, err := proto.Marshal(e.info)
	if err != nil {
		return fmt.Errorf("encode actor %s: %w", e.info.ActorId, err)
	}
	if err := m.server.store.Put(context.Background(), store.TableActors, e.info.ActorId, raw); err != nil {
		return fmt.Errorf("persist actor %s: %w", e.info.ActorId, err)
	}
	return nil
}

func (m *actorManager) logPersistError(err error) {
	if err != nil {
		m.server.log.Error().Err(err).Msg("actor table write failed")
	}
}

func newActorID() string { return ids.Random(actorIDBytes) }

// checkActorRequest checks the fields of a CreateActor request that need no lookup and
// returns the parsed resources. Errors are InvalidArgument naming the field.
func checkActorRequest(req *pb.CreateActorRequest) (resources.Set, error) {
	invalid := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	if req.JobId == "" {
		return nil, invalid("job_id: required")
	}
	if req.ClassName == "" {
		return nil, invalid("class_name: required (the registered actor type)")
	}
	if strings.Contains(req.Name, "\x00") {
		return nil, invalid("name: must not contain a NUL byte")
	}
	if strings.Contains(req.Namespace, "\x00") {
		return nil, invalid("namespace: must not contain a NUL byte")
	}
	required, err := resources.ParseTaskResources(req.RequiredResources)
	if err != nil {
		return nil, invalid("%s", requiredResourcesError(err))
	}
	if req.MaxRestarts < -1 {
		return nil, invalid("max_restarts: must be >= -1 (-1 restarts without limit), got %d", req.MaxRestarts)
	}
	if req.MaxTaskRetries < -1 {
		return nil, invalid("max_task_retries: must be >= -1 (-1 retries without limit), got %d", req.MaxTaskRetries)
	}
	s := req.SchedulingStrategy
	switch s.GetKind() {
	case "", strategyDefault, strategySpread, strategyPlacementGroup, strategyNodeAffinity:
	default:
		return nil, invalid("scheduling_strategy.kind: must be DEFAULT (or empty), SPREAD, PLACEMENT_GROUP or NODE_AFFINITY, got %q", s.GetKind())
	}
	if s.GetKind() == strategyPlacementGroup {
		if s.PlacementGroupId == "" {
			return nil, invalid("scheduling_strategy.placement_group_id: required with kind PLACEMENT_GROUP")
		}
	} else if s.GetPlacementGroupId() != "" {
		return nil, invalid("scheduling_strategy.placement_group_id: only used with kind PLACEMENT_GROUP, got kind %q", s.GetKind())
	}
	if s.GetKind() == strategyNodeAffinity {
		if s.NodeId == "" {
			return nil, invalid("scheduling_strategy.node_id: required with kind NODE_AFFINITY")
		}
	} else if s.GetNodeId() != "" {
		return nil, invalid("scheduling_strategy.node_id: only used with kind NODE_AFFINITY, got kind %q", s.GetKind())
	}
	if req.ExecutableSha256 == "" {
		return nil, invalid("executable_sha256: required (upload the worker executable with ExecutableService first)")
	}
	if err := checkSHA256("executable_sha256", req.ExecutableSha256); err != nil {
		return nil, err
	}
	return required, nil
}

// requiredResourcesError puts "required_resources" in front of the field a resource
// error names: `["GPU"]: ...` becomes `required_resources["GPU"]: ...`.
func requiredResourcesError(err error) string {
	var fieldErr *fielderr.Error
	if errors.As(err, &fieldErr) {
		return "required_resources" + fieldErr.Field + ": " + fieldErr.Problem
	}
	return "required_resources: " + err.Error()
}

// CreateActor implements pb.ActorInfoServiceServer: validate, persist PENDING_CREATION,
// and let the scheduling loop find it a worker.
func (m *actorManager) CreateActor(ctx context.Context, req *pb.CreateActorRequest) (*pb.CreateActorReply, error) {
	required, err := checkActorRequest(req)
	if err != nil {
		return nil, err
	}
	// Lookups, cheapest first: the job, the placement group, the executable (a store read).
	job := m.server.jobs.get(req.JobId)
	if job == nil {
		return nil, status.Errorf(codes.InvalidArgument, "job_id: no job %q", req.JobId)
	}
	if job.IsDead {
		return nil, status.Errorf(codes.InvalidArgument, "job_id: job %s has finished", req.JobId)
	}
	strategy := proto.Clone(req.GetSchedulingStrategy()).(*pb.SchedulingStrategy)
	if strategy == nil {
		strategy = &pb.SchedulingStrategy{}
	}
	if strategy.Kind == "" {
		strategy.Kind = strategyDefault
	}
	pgID, bundleIndex := "", int32(resources.AnyBundle)
	if strategy.Kind == strategyPlacementGroup {
		if err := m.checkFitsGroup(strategy, required); err != nil {
			return nil, err
		}
		pgID, bundleIndex = strategy.PlacementGroupId, strategy.BundleIndex
	}
	held, err := m.server.executables.has(ctx, req.ExecutableSha256)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, status.Errorf(codes.FailedPrecondition, "executable %s not uploaded", req.ExecutableSha256)
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = job.Namespace
	}
	if namespace == "" {
		namespace = defaultNamespace
	}
	info := &pb.ActorInfo{
		ActorId: newActorID(), JobId: req.JobId, ClassName: req.ClassName, Name: req.Name, Namespace: namespace,
		State: pb.ActorState_ACTOR_PENDING_CREATION, RequiredResources: required.ToFloat(), SchedulingStrategy: strategy,
		PlacementGroupId: pgID, BundleIndex: bundleIndex, IsDetached: req.IsDetached,
		MaxRestarts: req.MaxRestarts, MaxTaskRetries: req.MaxTaskRetries, StartTimeMs: m.server.nowMs(),
		ExecutableSha256: req.ExecutableSha256, ConstructorArgs: req.ConstructorArgs,
		PendingReason: "waiting for its first scheduling attempt",
	}
	e := &actorEntry{info: info, request: required, changed: make(chan struct{})}

	m.mu.Lock()
	if req.Name != "" {
		if _, taken := m.names[nameKey(namespace, req.Name)]; taken {
			m.mu.Unlock()
			return nil, status.Errorf(codes.AlreadyExists, "name: an actor named %q already exists in namespace %q", req.Name, namespace)
		}
	}
	if err := m.persistLocked(e); err != nil {
		m.mu.Unlock()
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	m.actors[info.ActorId] = e
	if req.Name != "" {
		m.names[nameKey(namespace, req.Name)] = info.ActorId
	}
	m.mu.Unlock()
	// The job may have finished since the check above, its onJobDead sweep running
	// before the insert. A job that finishes from now on finds the actor in its sweep.
	if job := m.server.jobs.get(req.JobId); !req.IsDetached && (job == nil || job.IsDead) {
		m.mu.Lock()
		m.buryLocked(e, deathJobFinished)
		m.mu.Unlock()
	}
	m.mu.Lock()
	reply := proto.Clone(info).(*pb.ActorInfo)
	m.mu.Unlock()
	m.kick()
	m.server.log.Info().Str("actor_id", info.ActorId).Str("job_id", info.JobId).Str("class_name", info.ClassName).
		Str("name", info.Name).Str("strategy", strategy.Kind).Str("pg_id", pgID).Msg("actor registered")
	return &pb.CreateActorReply{Actor: reply}, nil
}

// checkFitsGroup checks that a PLACEMENT_GROUP actor names a live group and fits the
// bundle(s) it asks for.
func (m *actorManager) checkFitsGroup(strategy *pb.SchedulingStrategy, request resources.Set) error {
	group := m.server.pgs.info(strategy.PlacementGroupId)
	if group == nil {
		return status.Errorf(codes.NotFound, "scheduling_strategy.placement_group_id: no placement group %s", strategy.PlacementGroupId)
	}
	if group.State == pb.PlacementGroupState_REMOVED {
		return status.Errorf(codes.InvalidArgument, "scheduling_strategy.placement_group_id: placement group %s was removed", strategy.PlacementGroupId)
	}
	bundles := make([]resources.Set, len(group.Bundles))
	for i, b := range group.Bundles {
		set, err := resources.SetFromFloat(b.UnitResources)
		if err != nil {
			return status.Errorf(codes.Internal, "placement group %s bundle %d: %v", group.PlacementGroupId, i, err)
		}
		bundles[i] = set
	}
	if err := resources.CheckFitsBundle(group.PlacementGroupId, bundles, int(strategy.BundleIndex), request); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// load reads the actor table after a restart: ALIVE actors whose node is ALIVE in the
// reloaded node table stay ALIVE; others lost their worker and restart (or die);
// PENDING_CREATION and RESTARTING actors are scheduled again by the loop. Actors whose
// job finished or whose group was removed while a dying GCS could not record it die now.
func (m *actorManager) load(ctx context.Context) error {
	rows, err := m.server.store.GetAll(ctx, store.TableActors)
	if err != nil {
		return fmt.Errorf("load actor table: %w", err)
	}
	alive := map[string]bool{}
	for _, n := range m.server.nodes.aliveNodes() {
		alive[n.NodeId] = true
	}
	entries := make([]*actorEntry, 0, len(rows))
	jobDead, groupGone := map[string]bool{}, map[string]bool{}
	for id, raw := range rows {
		info := &pb.ActorInfo{}
		if err := proto.Unmarshal(raw, info); err != nil {
			return fmt.Errorf("load actor table: actor %s: %w", id, err)
		}
		request, err := resources.SetFromFloat(info.RequiredResources)
		if err != nil {
			return fmt.Errorf("load actor table: actor %s: %w", id, err)
		}
		if info.SchedulingStrategy == nil {
			info.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategyDefault}
		}
		entries = append(entries, &actorEntry{info: info, request: request, changed: make(chan struct{})})
		if job := m.server.jobs.get(info.JobId); job == nil || job.IsDead {
			jobDead[info.JobId] = true
		}
		if pg := info.SchedulingStrategy.GetPlacementGroupId(); pg != "" {
			if g := m.server.pgs.info(pg); g == nil || g.State == pb.PlacementGroupState_REMOVED {
				groupGone[pg] = true
			}
		}
	}
	sortActors(entries)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		m.actors[e.info.ActorId] = e
		if !e.dead() && e.info.Name != "" {
			m.names[nameKey(e.info.Namespace, e.info.Name)] = e.info.ActorId
		}
	}
	for _, e := range entries {
		switch {
		case e.dead():
		case jobDead[e.info.JobId] && !e.info.IsDetached:
			m.buryLocked(e, deathJobFinished)
		case groupGone[e.info.SchedulingStrategy.GetPlacementGroupId()]:
			m.buryLocked(e, deathGroupRemoved)
		case e.info.State == pb.ActorState_ACTOR_ALIVE && !alive[e.info.NodeId]:
			m.workerLostLocked(e, fmt.Sprintf("node %s died", e.info.NodeId))
		}
	}
	return nil
}

// sortActors orders actors by start time, then id.
func sortActors(entries []*actorEntry) {
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].info, entries[j].info
		if a.StartTimeMs != b.StartTimeMs {
			return a.StartTimeMs < b.StartTimeMs
		}
		return a.ActorId < b.ActorId
	})
}

// GetActorInfo implements pb.ActorInfoServiceServer.
func (m *actorManager) GetActorInfo(ctx context.Context, req *pb.GetActorInfoRequest) (*pb.GetActorInfoReply, error) {
	for {
		m.mu.Lock()
		e := m.actors[req.ActorId]
		if e == nil {
			m.mu.Unlock()
			return nil, status.Errorf(codes.NotFound, "actor_id %s: no such actor", req.ActorId)
		}
		ready := e.dead() || (e.info.State == pb.ActorState_ACTOR_ALIVE && e.info.NumRestarts >= req.MinNumRestarts)
		if !req.WaitAlive || ready {
			reply := &pb.GetActorInfoReply{Actor: proto.Clone(e.info).(*pb.ActorInfo)}
			m.mu.Unlock()
			return reply, nil
		}
		changed, state, reason := e.changed, e.info.State, e.info.PendingReason
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.Errorf(codes.DeadlineExceeded, "actor %s is not ALIVE yet (%s: %s)", req.ActorId, actorStateName(state), reason)
		}
	}
}

// actorStateName is Ray's name of a state: the enum value without "ACTOR_".
func actorStateName(s pb.ActorState) string { return strings.TrimPrefix(s.String(), "ACTOR_") }

// GetNamedActorInfo implements pb.ActorInfoServiceServer. An empty namespace is "default".
func (m *actorManager) GetNamedActorInfo(ctx context.Context, req *pb.GetNamedActorInfoRequest) (*pb.GetNamedActorInfoReply, error) {
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = defaultNamespace
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.names[nameKey(namespace, req.Name)]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no live actor named %q in namespace %q", req.Name, namespace)
	}
	return &pb.GetNamedActorInfoReply{Actor: proto.Clone(m.actors[id].info).(*pb.ActorInfo)}, nil
}

// GetAllActorInfo implements pb.ActorInfoServiceServer: sorted by start time, then id.
func (m *actorManager) GetAllActorInfo(ctx context.Context, _ *pb.GetAllActorInfoRequest) (*pb.GetAllActorInfoReply, error) {
	m.mu.Lock()
	entries := make([]*actorEntry, 0, len(m.actors))
	for _, e := range m.actors {
		entries = append(entries, e)
	}
	sortActors(entries)
	out := make([]*pb.ActorInfo, len(entries))
	for i, e := range entries {
		out[i] = proto.Clone(e.info).(*pb.ActorInfo)
	}
	m.mu.Unlock()
	return &pb.GetAllActorInfoReply{Actors: out}, nil
}

// KillActor implements pb.ActorInfoServiceServer. The GCS changes the actor's state
// before it kills the worker, so the raylet's report of that worker's exit is ignored.
func (m *actorManager) KillActor(ctx context.Context, req *pb.KillActorRequest) (*pb.KillActorReply, error) {
	m.mu.Lock()
	e := m.actors[req.ActorId]
	if e == nil {
		m.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "actor_id %s: no such actor", req.ActorId)
	}
	if e.dead() {
		m.mu.Unlock()
		return &pb.KillActorReply{}, nil
	}
	node, worker := m.currentWorkerLocked(e)
	if req.NoRestart {
		m.buryLocked(e, deathKilled)
	} else {
		m.workerLostLocked(e, deathKilled)
	}
	m.mu.Unlock()
	m.killWorker(node, worker, deathKilled)
	m.server.log.Info().Str("actor_id", req.ActorId).Bool("no_restart", req.NoRestart).Msg("actor killed")
	return &pb.KillActorReply{}, nil
}

// currentWorkerLocked is the node and worker of an ALIVE actor ("" otherwise).
func (m *actorManager) currentWorkerLocked(e *actorEntry) (nodeID, workerID string) {
	if e.info.State == pb.ActorState_ACTOR_ALIVE {
		return e.info.NodeId, e.info.WorkerId
	}
	return "", ""
}

// ReportWorkerFailure implements pb.ActorInfoServiceServer: the worker of a live actor
// exited. Reports of workers that no actor runs now (task workers, workers the GCS
// already replaced or killed) are ignored.
func (m *actorManager) ReportWorkerFailure(ctx context.Context, req *pb.ReportWorkerFailureRequest) (*pb.ReportWorkerFailureReply, error) {
	if req.WorkerId == "" {
		return nil, status.Error(codes.InvalidArgument, "worker_id: required")
	}
	why := "worker exited (" + req.ExitDetail + ")"
	m.mu.Lock()
	defer m.mu.Unlock()
	candidates := []*actorEntry{m.actors[req.ActorId]}
	if req.ActorId == "" {
		candidates = candidates[:0]
		for _, e := range m.actors {
			candidates = append(candidates, e)
		}
	}
	for _, e := range candidates {
		switch {
		case e == nil || e.dead():
		case e.info.State == pb.ActorState_ACTOR_ALIVE && e.info.WorkerId == req.WorkerId:
			m.server.log.Warn().Str("actor_id", e.info.ActorId).Str("node_id", req.NodeId).Str("worker_id", req.WorkerId).
				Str("exit_detail", req.ExitDetail).Msg("actor's worker exited")
			m.workerLostLocked(e, why)
			return &pb.ReportWorkerFailureReply{}, nil
		case e.creating != nil && e.creating.WorkerId == req.WorkerId:
			// The constructor's goroutine sees its call end and restarts or buries it.
			e.creatingLost = why
			e.cancelCreate()
			return &pb.ReportWorkerFailureReply{}, nil
		}
	}
	return &pb.ReportWorkerFailureReply{}, nil
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
	e.info.PendingReason = "restarting: " + why
	e.nextAttempt, e.backoff = time.Time{}, 0
	m.logPersistError(m.persistLocked(e))
	e.notify()
	m.kick()
	m.server.log.Info().Str("actor_id", e.info.ActorId).Str("job_id", e.info.JobId).Int64("num_restarts", e.info.NumRestarts).
		Str("reason", why).Msg("actor RESTARTING")
}

// buryLocked makes an actor DEAD (once). The caller kills its worker if it has one
// (read it before: see currentWorkerLocked).
func (m *actorManager) buryLocked(e *actorEntry, cause string) {
	if e.dead() {
		return
	}
	e.endAttemptLocked()
	m.closeWorkerConn(e.info.Address)
	// node_id, worker_id and pid stay, to show where it last ran (Ray's state API does);
	// the address goes, so that nobody calls a dead worker.
	e.info.Address = ""
	e.info.State = pb.ActorState_ACTOR_DEAD
	e.info.DeathCause = cause
	e.info.EndTimeMs = m.server.nowMs()
	e.info.PendingReason = ""
	if e.info.Name != "" && m.names[nameKey(e.info.Namespace, e.info.Name)] == e.info.ActorId {
		delete(m.names, nameKey(e.info.Namespace, e.info.Name))
	}
	m.logPersistError(m.persistLocked(e))
	e.notify()
	m.server.log.Info().Str("actor_id", e.info.ActorId).Str("job_id", e.info.JobId).Str("node_id", e.info.NodeId).
		Str("death_cause", cause).Msg("actor DEAD")
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
	for _, n := range m.server.nodes.aliveNodes() {
		go func() {
			client, err := m.server.nodes.rayletClient(n.NodeId)
			if err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(m.ctx, rayletCallTimeout)
			defer cancel()
			if _, err := client.KillJobWorkers(ctx, &pb.KillJobWorkersRequest{JobId: job.JobId}); err != nil {
				m.server.log.Debug().Err(err).Str("node_id", n.NodeId).Str("job_id", job.JobId).Msg("KillJobWorkers failed")
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
	client, err := m.server.nodes.rayletClient(nodeID)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, rayletCallTimeout)
	defer cancel()
	reply, err := client.GetWorkers(ctx, &pb.GetWorkersRequest{})
	if err != nil {
		if status.Code(err) != codes.Unimplemented {
			m.server.log.Debug().Err(err).Str("node_id", nodeID).Msg("could not list the raylet's workers")
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
		m.server.log.Info().Str("node_id", nodeID).Str("worker_id", w.WorkerId).Str("actor_id", w.ActorId).Msg("killing an orphaned actor worker")
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
		log := m.server.log.With().Str("node_id", nodeID).Str("worker_id", workerID).Logger()
		backoff := m.killRetry
		for {
			client, err := m.server.nodes.rayletClient(nodeID)
			if err != nil {
				log.Debug().Err(err).Msg("KillWorker not sent: the node is not ALIVE, its workers died with it")
				return
			}
			ctx, cancel := context.WithTimeout(m.ctx, rayletCallTimeout)
			reply, err := client.KillWorker(ctx, &pb.KillWorkerRequest{WorkerId: workerID, Reason: reason})
			cancel()
			switch {
			case err == nil:
				m.server.nodes.applyResourceReport(nodeID, reply.Resources)
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

// workerClient returns the CoreWorkerService client of a worker, from a cached connection.
func (m *actorManager) workerClient(address string) (pb.CoreWorkerServiceClient, error) {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if conn := m.workerConns[address]; conn != nil {
		return pb.NewCoreWorkerServiceClient(conn), nil
	}
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	m.workerConns[address] = conn
	return pb.NewCoreWorkerServiceClient(conn), nil
}

func (m *actorManager) closeWorkerConn(address string) {
	if address == "" {
		return
	}
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if conn := m.workerConns[address]; conn != nil {
		_ = conn.Close()
		delete(m.workerConns, address)
	}
}

// loop runs scheduling rounds when woken, when a retry is due, and at least every second.
func (m *actorManager) loop(stop <-chan struct{}) {
	for {
		wait := m.scheduleRound(time.Now())
		if time.Since(m.lastPrune) >= time.Second {
			m.lastPrune = time.Now()
			m.pruneDead()
		}
		select {
		case <-stop:
			return
		case <-m.wake:
		case <-time.After(wait):
		}
	}
}

// scheduleRound decides a node for every pending actor whose retry is due (restarting
// actors first, then by start time) and starts a placement for each that got targets.
// It returns how long until the next retry is due.
func (m *actorManager) scheduleRound(now time.Time) time.Duration {
	retryAll := m.retryAll.Swap(false)
	next := time.Second
	// The inputs come first, without mu: the node table and the groups pending actors use.
	nodes := m.server.nodes.aliveNodes()
	m.mu.Lock()
	groupIDs := map[string]bool{}
	for _, e := range m.actors {
		if e.pending() && !e.placing {
			if pg := e.info.SchedulingStrategy.GetPlacementGroupId(); pg != "" {
				groupIDs[pg] = true
			}
		}
	}
	m.mu.Unlock()
	groups := map[string]*placement.WorkGroup{}
	for id := range groupIDs {
		groups[id] = newWorkGroup(m.server.pgs.info(id))
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	var queue []*actorEntry
	for _, e := range m.actors {
		if !e.pending() || e.placing {
			continue
		}
		if !retryAll && e.nextAttempt.After(now) {
			next = min(next, e.nextAttempt.Sub(now))
			continue
		}
		queue = append(queue, e)
	}
	if len(queue) == 0 {
		return next
	}
	sortActors(queue)
	sort.SliceStable(queue, func(i, j int) bool {
		return queue[i].info.State == pb.ActorState_ACTOR_RESTARTING && queue[j].info.State != pb.ActorState_ACTOR_RESTARTING
	})
	views := workNodes(nodes)
	for _, e := range queue {
		strategy := e.info.SchedulingStrategy
		req := workRequest(e.info.ActorId, strategy, e.request, m.spreadCursor)
		if strategy.GetKind() == strategySpread {
			m.spreadCursor++
		}
		decision := chooseActorNodes(req, views, groups[strategy.GetPlacementGroupId()])
		switch {
		case decision.Fail != "":
			m.buryLocked(e, decision.Fail)
		case len(decision.Targets) == 0:
			m.waitLocked(e, decision.Wait, now)
			next = min(next, e.backoff)
		default:
			m.startPlacementLocked(e, decision.Targets)
			// Later actors of this round see the first target as taken.
			for i := range views {
				if views[i].ID == placement.NodeID(decision.Targets[0].NodeID) {
					if available, err := views[i].Available.Subtract(e.request); err == nil {
						views[i].Available = available
					}
				}
			}
		}
	}
	return next
}

// workNodes turns the ALIVE nodes into the chooser's view (rows whose resources do not
// parse are left out).
func workNodes(nodes []*pb.NodeInfo) []placement.WorkNode {
	views := make([]placement.WorkNode, 0, len(nodes))
	for _, n := range nodes {
		total, err := resources.SetFromFloat(n.ResourcesTotal)
		if err != nil {
			continue
		}
		available, err := resources.SetFromFloat(n.ResourcesAvailable)
		if err != nil {
			continue
		}
		views = append(views, placement.WorkNode{ID: placement.NodeID(n.NodeId), Total: total, Available: available, Draining: n.IsDraining})
	}
	return views
}

// waitLocked records why an actor has no worker yet and backs off.
func (m *actorManager) waitLocked(e *actorEntry, reason string, now time.Time) {
	if e.backoff == 0 {
		e.backoff = actorRetryBackoffMin
	} else {
		e.backoff = min(2*e.backoff, actorRetryBackoffMax)
	}
	e.nextAttempt = now.Add(e.backoff)
	if e.info.PendingReason != reason {
		e.info.PendingReason = reason
		m.logPersistError(m.persistLocked(e))
		m.server.log.Debug().Str("actor_id", e.info.ActorId).Str("pg_id", e.info.PlacementGroupId).Str("reason", reason).Msg("actor waiting")
	}
}

// startPlacementLocked starts attempt e.attempt+1 on the targets in the background.
func (m *actorManager) startPlacementLocked(e *actorEntry, targets []leaseTarget) {
	e.attempt++
	e.placing = true
	lease := &pb.RequestWorkerLeaseRequest{
		JobId: e.info.JobId, ExecutableSha256: e.info.ExecutableSha256, Resources: e.info.RequiredResources,
		PlacementGroupId: e.info.SchedulingStrategy.GetPlacementGroupId(), ActorId: e.info.ActorId, Detached: e.info.IsDetached,
	}
	create := &pb.CreateActorOnWorkerRequest{ActorId: e.info.ActorId, ClassName: e.info.ClassName,
		ConstructorArgs: e.info.ConstructorArgs, NumRestarts: e.info.NumRestarts}
	go m.place(e, e.attempt, targets, lease, create)
}

// place runs one attempt: lease a worker from the first target that grants one, run the
// constructor on it, and record the outcome unless the attempt was superseded meanwhile
// (then the worker is killed).
func (m *actorManager) place(e *actorEntry, attempt int64, targets []leaseTarget, lease *pb.RequestWorkerLeaseRequest, create *pb.CreateActorOnWorkerRequest) {
	log := m.server.log.With().Str("actor_id", create.ActorId).Str("job_id", lease.JobId).Logger()
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
				m.waitLocked(e, "no worker lease yet: "+strings.Join(refusals, "; "), time.Now())
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
	client, err := m.workerClient(worker.Address)
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
		m.markAliveLocked(e, worker, reply.Pid)
		log.Info().Str("node_id", worker.NodeId).Str("worker_id", worker.WorkerId).Str("pg_id", worker.PlacementGroupId).
			Int32("bundle", worker.BundleIndex).Msg("actor ALIVE")
	}
}

// requestLease asks one raylet for a dedicated worker.
func (m *actorManager) requestLease(t leaseTarget, lease *pb.RequestWorkerLeaseRequest) (*pb.WorkerInfo, error) {
	client, err := m.server.nodes.rayletClient(t.NodeID)
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
	m.server.nodes.applyResourceReport(t.NodeID, reply.Resources)
	if reply.Worker == nil || reply.Worker.WorkerId == "" || reply.Worker.Address == "" {
		return nil, status.Errorf(codes.Internal, "raylet granted a lease without a worker id and address")
	}
	return reply.Worker, nil
}

// markAliveLocked records the worker an actor now runs on.
func (m *actorManager) markAliveLocked(e *actorEntry, worker *pb.WorkerInfo, pid int64) {
	e.info.State = pb.ActorState_ACTOR_ALIVE
	e.info.NodeId, e.info.Pid, e.info.WorkerId, e.info.Address = worker.NodeId, cmp.Or(pid, worker.Pid), worker.WorkerId, worker.Address
	e.info.GpuIds, e.info.CudaVisibleDevices = worker.GpuIds, worker.CudaVisibleDevices
	if worker.PlacementGroupId != "" {
		e.info.PlacementGroupId, e.info.BundleIndex = worker.PlacementGroupId, worker.BundleIndex
	} else {
		e.info.BundleIndex = e.requestedBundle()
	}
	e.info.PendingReason = ""
	e.nextAttempt, e.backoff = time.Time{}, 0
	m.logPersistError(m.persistLocked(e))
	e.notify()
}

// pruneDead forgets DEAD actors beyond the configured age and count.
func (m *actorManager) pruneDead() {
	cfg := m.server.cfg
	m.mu.Lock()
	var dead []deadActor
	for id, e := range m.actors {
		if e.dead() {
			dead = append(dead, deadActor{ID: id, EndTimeMs: e.info.EndTimeMs})
		}
	}
	drop := deadActorsToPrune(dead, m.server.nowMs(), cfg.DeadActorRetention, cfg.MaxDeadActors)
	for _, id := range drop {
		delete(m.actors, id)
	}
	m.mu.Unlock()
	if len(drop) > 0 {
		if _, err := m.server.store.Delete(context.Background(), store.TableActors, drop...); err != nil {
			m.server.log.Error().Err(err).Msg("could not delete dead actors")
		}
	}
}

// addExecutableRefs records every listed actor's executable: an actor that is not DEAD
// uses it, a DEAD one used it until its death.
func (m *actorManager) addExecutableRefs(refs executableRefs) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.actors {
		refs.add(e.info.ExecutableSha256, !e.dead(), e.info.EndTimeMs)
	}
}

// deadActor is what pruning needs of a DEAD actor.
type deadActor struct {
	ID        string
	EndTimeMs int64
}

// deadActorsToPrune returns the dead actors to forget: those that died more than
// retention before nowMs, and the oldest deaths beyond maxKept.
func deadActorsToPrune(dead []deadActor, nowMs int64, retention time.Duration, maxKept int) []string {
	sorted := append([]deadActor(nil), dead...)
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

// leaseTarget is one raylet to ask for a worker, with the bundle index to pass.
type leaseTarget struct {
	NodeID      string
	BundleIndex int32
}

// actorPlacement is the actor scheduler's decision for one actor: raylets to ask in
// order, or why there is none now (Wait: pending_reason) or ever (Fail: death_cause).
type actorPlacement struct {
	Targets    []leaseTarget
	Wait, Fail string
}

// workRequest turns a SchedulingStrategy into the chooser's request for one actor (or
// one task's scheduling key, named id).
func workRequest(id string, strategy *pb.SchedulingStrategy, request resources.Set, spreadCursor uint64) placement.WorkRequest {
	req := placement.WorkRequest{ID: id, Resources: request, BundleIndex: resources.AnyBundle, SpreadCursor: spreadCursor}
	switch strategy.GetKind() {
	case strategySpread:
		req.Strategy = placement.WorkSpread
	case strategyNodeAffinity:
		req.Strategy, req.NodeID, req.Soft = placement.WorkNodeAffinity, placement.NodeID(strategy.NodeId), strategy.Soft
	case strategyPlacementGroup:
		req.Strategy, req.BundleIndex = placement.WorkPlacementGroup, int(strategy.BundleIndex)
	}
	return req
}

// newWorkGroup is the chooser's view of a placement group (nil: unknown). Bundles are
// usable while the group is CREATED, or RESCHEDULING (its placed bundles stay committed).
func newWorkGroup(info *pb.PlacementGroupInfo) *placement.WorkGroup {
	if info == nil {
		return nil
	}
	g := &placement.WorkGroup{ID: info.PlacementGroupId, Removed: info.State == pb.PlacementGroupState_REMOVED,
		Usable:      info.State == pb.PlacementGroupState_CREATED || info.State == pb.PlacementGroupState_RESCHEDULING,
		BundleNodes: make([]placement.NodeID, len(info.Bundles))}
	for i, b := range info.Bundles {
		g.BundleNodes[i] = placement.NodeID(b.NodeId)
	}
	return g
}

// chooseActorNodes decides where an actor may get a worker: placement.ChooseNodes over
// the node and group views, its Choice turned into the actor's targets, pending reason
// or death cause.
func chooseActorNodes(req placement.WorkRequest, nodes []placement.WorkNode, group *placement.WorkGroup) actorPlacement {
	choice := placement.ChooseNodes(req, nodes, group)
	switch choice.Outcome {
	case placement.WorkPlaced:
		out := actorPlacement{Targets: make([]leaseTarget, len(choice.Targets))}
		for i, t := range choice.Targets {
			out.Targets[i] = leaseTarget{NodeID: string(t.Node), BundleIndex: int32(t.BundleIndex)}
		}
		return out
	case placement.WorkUnschedulable:
		if choice.Cause.Code == placement.ReasonGroupRemoved {
			return actorPlacement{Fail: deathGroupRemoved}
		}
		return actorPlacement{Fail: choice.Message}
	default:
		return actorPlacement{Wait: choice.Message}
	}
}
