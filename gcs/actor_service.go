package gcs

// The actor manager's RPC handlers (ActorInfoService): validation, registration,
// lookups, kills and the raylets' worker-failure reports.

import (
	"cmp"
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

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
	for _, field := range []struct{ name, value string }{{"name", req.Name}, {"namespace", req.Namespace}, {"class_name", req.ClassName}} {
		if err := checkName(field.name, field.value); err != nil {
			return nil, err
		}
	}
	required, err := resources.ParseTaskResources(req.RequiredResources)
	if err != nil {
		return nil, invalid("%s", resourcesError("required_resources", err))
	}
	if req.MaxRestarts < -1 {
		return nil, invalid("max_restarts: must be >= -1 (-1 restarts without limit), got %d", req.MaxRestarts)
	}
	if req.MaxTaskRetries < -1 {
		return nil, invalid("max_task_retries: must be >= -1 (-1 retries without limit), got %d", req.MaxTaskRetries)
	}
	if err := checkSchedulingStrategy(req.SchedulingStrategy); err != nil {
		return nil, err
	}
	if req.PythonWorker != nil {
		// A Python actor: its workers run the interpreter (the raylet checks the paths).
		if req.ExecutableSha256 != "" {
			return nil, invalid("executable_sha256: must be empty with python_worker")
		}
		if req.PythonClassKey == "" {
			return nil, invalid("python_class_key: required with python_worker")
		}
		return required, nil
	}
	if req.ExecutableSha256 == "" {
		return nil, invalid("executable_sha256: required (upload the worker executable with ExecutableService first)")
	}
	if err := checkSHA256("executable_sha256", req.ExecutableSha256); err != nil {
		return nil, err
	}
	return required, nil
}

// checkSchedulingStrategy checks a strategy's fields (nil is DEFAULT). Errors are
// InvalidArgument naming the field.
func checkSchedulingStrategy(s *pb.SchedulingStrategy) error {
	invalid := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	switch s.GetKind() {
	case strategyDefault, strategySpread, strategyPlacementGroup, strategyNodeAffinity:
	default:
		return invalid("scheduling_strategy.kind: must be DEFAULT, SPREAD, PLACEMENT_GROUP or NODE_AFFINITY, got %d", s.GetKind())
	}
	kind := strategyName(s.GetKind())
	if s.GetKind() == strategyPlacementGroup {
		if s.PlacementGroupId == "" {
			return invalid("scheduling_strategy.placement_group_id: required with kind PLACEMENT_GROUP")
		}
	} else if s.GetPlacementGroupId() != "" {
		return invalid("scheduling_strategy.placement_group_id: only used with kind PLACEMENT_GROUP, got kind %q", kind)
	}
	if s.GetKind() == strategyNodeAffinity {
		if s.NodeId == "" {
			return invalid("scheduling_strategy.node_id: required with kind NODE_AFFINITY")
		}
	} else if s.GetNodeId() != "" {
		return invalid("scheduling_strategy.node_id: only used with kind NODE_AFFINITY, got kind %q", kind)
	}
	if (len(s.GetLabelSelector()) > 0 || len(s.GetSoftLabelSelector()) > 0) && s.GetKind() != strategyDefault && s.GetKind() != strategySpread {
		return invalid("scheduling_strategy.label_selector: only used with kind DEFAULT or SPREAD, got kind %q", kind)
	}
	if _, _, err := strategySelectors(s); err != nil {
		return invalid("%s", err)
	}
	return nil
}

// strategySelectors parses a strategy's hard and soft label selectors; an error names
// the field (scheduling_strategy.label_selector["zone"]: ...).
func strategySelectors(s *pb.SchedulingStrategy) (hard, soft nodelabel.Selector, err error) {
	if hard, err = nodelabel.ParseSelector(s.GetLabelSelector()); err != nil {
		return nil, nil, fielderr.WithPrefix(err, "scheduling_strategy.label_selector")
	}
	if soft, err = nodelabel.ParseSelector(s.GetSoftLabelSelector()); err != nil {
		return nil, nil, fielderr.WithPrefix(err, "scheduling_strategy.soft_label_selector")
	}
	return hard, soft, nil
}

// strategyName is Ray's name of a strategy kind: the enum value without its prefix.
func strategyName(k pb.SchedulingStrategyKind) string {
	return strings.TrimPrefix(k.String(), "SCHEDULING_STRATEGY_")
}

// resourcesError puts the request's field in front of the field a resource error
// names: `["GPU"]: ...` becomes `required_resources["GPU"]: ...`.
func resourcesError(field string, err error) string {
	var fieldErr *fielderr.Error
	if errors.As(err, &fieldErr) {
		return field + fieldErr.Field + ": " + fieldErr.Problem
	}
	return field + ": " + err.Error()
}

// CreateActor implements pb.ActorInfoServiceServer: validate, persist PENDING_CREATION,
// and let the scheduling loop find it a worker.
func (m *actorManager) CreateActor(ctx context.Context, req *pb.CreateActorRequest) (*pb.CreateActorReply, error) {
	required, err := checkActorRequest(req)
	if err != nil {
		return nil, err
	}
	// Lookups, cheapest first: the job, the placement group, the executable (a store read).
	job := m.jobs.get(req.JobId)
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
	pgID, bundleIndex := "", int32(resources.AnyBundle)
	if strategy.Kind == strategyPlacementGroup {
		if err := m.checkFitsGroup(strategy, required); err != nil {
			return nil, err
		}
		pgID, bundleIndex = strategy.PlacementGroupId, strategy.BundleIndex
	}
	if req.PythonWorker == nil {
		held, err := m.executables.has(ctx, req.ExecutableSha256)
		if err != nil {
			return nil, err
		}
		if !held {
			return nil, status.Errorf(codes.FailedPrecondition, "executable %s not uploaded", req.ExecutableSha256)
		}
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
		MaxRestarts: req.MaxRestarts, MaxTaskRetries: req.MaxTaskRetries, StartTimeMs: m.now().UnixMilli(),
		ExecutableSha256: req.ExecutableSha256, ConstructorArgs: req.ConstructorArgs,
		PythonWorker: req.PythonWorker, PythonClassKey: req.PythonClassKey,
		PendingReason: "waiting for its first scheduling attempt",
	}
	if auth.ScopeFrom(ctx).IsTenant() {
		info.OwnerTokenSha256 = auth.HashToken(rpcutil.TokenFromIncoming(ctx)) // its worker takes its owner's token
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
	if job := m.jobs.get(req.JobId); !req.IsDetached && (job == nil || job.IsDead) {
		m.mu.Lock()
		m.buryLocked(e, deathJobFinished)
		m.mu.Unlock()
	}
	m.mu.Lock()
	reply := proto.Clone(e.info).(*pb.ActorInfo) // the entry's row, which a change replaces
	m.mu.Unlock()
	m.kick()
	m.log.Info().Str("actor_id", info.ActorId).Str("job_id", info.JobId).Str("class_name", info.ClassName).
		Str("name", info.Name).Str("strategy", strategyName(strategy.Kind)).Str("pg_id", pgID).Msg("actor registered")
	return &pb.CreateActorReply{Actor: reply}, nil
}

// checkFitsGroup checks that a PLACEMENT_GROUP actor names a live group and fits the
// bundle(s) it asks for.
func (m *actorManager) checkFitsGroup(strategy *pb.SchedulingStrategy, request resources.Set) error {
	group := m.groups.info(strategy.PlacementGroupId)
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
	for _, field := range []struct{ name, value string }{{"name", req.Name}, {"namespace", req.Namespace}} {
		if err := checkName(field.name, field.value); err != nil {
			return nil, err
		}
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
		// Answered only once the DEAD row is saved: an acknowledged kill holds across a
		// GCS restart.
		row := m.deadRowLocked(e, deathKilled)
		if err := m.saveRow(row); err != nil {
			m.mu.Unlock()
			return nil, errorf(errUnavailable, "kill actor %s: %v", req.ActorId, err)
		}
		m.buriedLocked(e, row)
	} else {
		m.workerLostLocked(e, deathKilled)
	}
	m.mu.Unlock()
	m.killWorker(node, worker, deathKilled)
	m.log.Info().Str("actor_id", req.ActorId).Bool("no_restart", req.NoRestart).Msg("actor killed")
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
			m.log.Warn().Str("actor_id", e.info.ActorId).Str("node_id", req.NodeId).Str("worker_id", req.WorkerId).
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

// ChooseLeaseTargets implements pb.ActorInfoServiceServer: the actor scheduler's node
// choice (placement.ChooseNodes over the ALIVE nodes) for the SDK's tasks.
func (m *actorManager) ChooseLeaseTargets(ctx context.Context, req *pb.ChooseLeaseTargetsRequest) (*pb.ChooseLeaseTargetsReply, error) {
	request, err := resources.ParseTaskResources(req.Resources)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s", resourcesError("resources", err))
	}
	strategy := req.SchedulingStrategy
	if err := checkSchedulingStrategy(strategy); err != nil {
		return nil, err
	}
	nodes := m.nodes.aliveNodes()
	var group *placement.WorkGroup
	if strategy.GetKind() == strategyPlacementGroup {
		group = newWorkGroup(m.groups.info(strategy.PlacementGroupId))
	}
	var cursor uint64
	if strategy.GetKind() == strategySpread {
		cursor = m.leaseSpreadCursor.Add(1) - 1
	}
	choice := placement.ChooseNodes(workRequest(req.RequestId, strategy, request, cursor), workNodes(nodes), group)

	addresses := make(map[string]string, len(nodes))
	for _, n := range nodes {
		addresses[n.NodeId] = n.RayletAddress
	}
	reply := &pb.ChooseLeaseTargetsReply{Outcome: leaseOutcomes[choice.Outcome], Reason: choice.Message, ReasonCode: string(choice.Cause.Code)}
	if strategy.GetKind() != strategyPlacementGroup && choice.Outcome == placement.WorkPlaced && len(choice.Targets) > 0 {
		// Outside groups a lease is charged to its job's queue before it may be had.
		charged, held, err := m.admitTaskLease(req, request)
		if err != nil || held != nil {
			return held, err
		}
		reply.Charged = charged
	}
	if strategy.GetKind() != strategyPlacementGroup { // a group's tasks wait for the group: it is the demand
		m.tasks.note(req.RequestId, request, leaseSelector(strategy), int(req.Backlog), choice.Outcome, len(choice.Targets) > 0, m.now())
	}
	target := func(t placement.Target, now bool) *pb.LeaseTarget {
		return &pb.LeaseTarget{NodeId: string(t.Node), RayletAddress: addresses[string(t.Node)], BundleIndex: int32(t.BundleIndex), AvailableNow: now}
	}
	for _, t := range choice.Targets {
		reply.Targets = append(reply.Targets, target(t, true))
	}
	for _, t := range choice.Later {
		reply.Targets = append(reply.Targets, target(t, false))
	}
	for _, r := range choice.Rejected {
		reply.Rejected = append(reply.Rejected, &pb.RejectedNode{NodeId: string(r.Node), Code: string(r.Reason.Code), Message: r.Reason.String()})
	}
	return reply, nil
}

// admitTaskLease charges a task lease outside groups (one that names its charge) to
// its job's queue; held is the reply when admission holds it back. With queues off it
// charges nothing.
func (m *actorManager) admitTaskLease(req *pb.ChooseLeaseTargetsRequest, request resources.Set) (charged bool, held *pb.ChooseLeaseTargetsReply, err error) {
	if m.leases == nil || req.ChargeId == "" {
		return false, nil, nil
	}
	job := m.jobs.get(req.JobId)
	namespace := defaultNamespace
	if job != nil {
		namespace = cmp.Or(job.Namespace, defaultNamespace)
	}
	id := taskLeaseID(req.JobId, req.ChargeId)
	d := m.leases.admitLeases([]leaseWork{{id: id, namespace: namespace, resources: request, arrival: m.now().UnixMilli()}})
	if !d.enabled {
		return false, nil, nil
	}
	if job == nil || job.IsDead {
		// Its end returned its job's charges already: this one would never be.
		m.leases.returnLeases([]string{id})
		return false, nil, status.Errorf(codes.InvalidArgument, "job_id: %q is not a running job (a lease's charge belongs to its job)", req.JobId)
	}
	if _, ok := d.admitted[id]; ok {
		return true, nil, nil
	}
	wait := d.waiting[id]
	return false, &pb.ChooseLeaseTargetsReply{Outcome: pb.LeaseOutcome_LEASE_OUTCOME_NOT_NOW,
		Reason: admissionWaitText(wait.reason, wait.queue), PendingReasonCode: string(wait.reason)}, nil
}

// ReturnLeaseCharge implements pb.ActorInfoServiceServer.
func (m *actorManager) ReturnLeaseCharge(ctx context.Context, req *pb.ReturnLeaseChargeRequest) (*pb.ReturnLeaseChargeReply, error) {
	if req.ChargeId == "" {
		return nil, status.Errorf(codes.InvalidArgument, "charge_id: empty")
	}
	if m.leases != nil {
		m.leases.returnLeases([]string{taskLeaseID(req.JobId, req.ChargeId)})
	}
	return &pb.ReturnLeaseChargeReply{}, nil
}

var leaseOutcomes = map[placement.WorkOutcome]pb.LeaseOutcome{
	placement.WorkPlaced:        pb.LeaseOutcome_LEASE_OUTCOME_PLACED,
	placement.WorkNotNow:        pb.LeaseOutcome_LEASE_OUTCOME_NOT_NOW,
	placement.WorkInfeasible:    pb.LeaseOutcome_LEASE_OUTCOME_INFEASIBLE,
	placement.WorkUnschedulable: pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE,
}
