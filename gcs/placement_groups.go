package gcs

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/placement"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Placement-group lifecycle settings.
const (
	// maxRemovedGroupsKept and removedGroupRetention bound how many REMOVED groups stay
	// listed, and for how long, as Ray keeps destroyed groups for its state API.
	maxRemovedGroupsKept  = 1000
	removedGroupRetention = time.Hour
	// retryBackoffMin/Max: a group that could not be placed is retried after a backoff
	// that doubles from Min to Max; a node joining or resources being released retries
	// every pending group at once.
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 5 * time.Second
	// rayletCallTimeout bounds each prepare / commit / cancel call.
	rayletCallTimeout = 10 * time.Second
	// placementGroupIDBytes is Ray's PlacementGroupID size: 14 unique bytes + the job id.
	placementGroupIDBytes = 14
	lifetimeDetached      = "detached"
)

// pgEntry is one placement group in the manager. Guarded by pgManager.mu.
type pgEntry struct {
	// id is the group's id (constant): what code outside mu may read, since info is
	// replaced under mu (a removal swaps in the REMOVED row).
	id      string
	info    *pb.PlacementGroupInfo // the persisted row
	request placement.Request      // the parsed bundles and selectors (constant)
	seq     int64                  // arrival order
	// inFlight holds the plan of a running two-phase commit, by bundle index.
	inFlight map[int]placement.BundlePlacement
	retry    retryBackoff
	// changed, made when someone waits, is closed (and forgotten) whenever the group's
	// state changes.
	changed chan struct{}
	// shapeKey is requestShapeKey(request) (constant); queued the shape the group waits
	// in, nil when it is not queued (placed, being placed, backing off or removed).
	shapeKey string
	queued   *shape
	// cancelling: the group was removed and its raylets have not all confirmed the
	// cancel yet; the scheduler's view still counts its bundles.
	cancelling bool
	// eviction is set while the group is being preempted (pg_preemption.go).
	eviction *evictionState
	// lastNoticePoll is when the group's owner last polled WaitPreemptionNotice (its
	// preemption hook listens).
	lastNoticePoll time.Time
	// listeners are the WaitPreemptionNotice pollers by listener id (pg_preemption.go).
	listeners map[string]*noticeListener
	// queuedSince is when the group last started waiting (its preemption delay counts
	// from then); admittedAt when it last became CREATED (its minRuntime counts from
	// then). Zero: not known since the GCS started (creation and running_since_ms stand in).
	queuedSince, admittedAt time.Time
	// waitingForNode: its last preemption decision was to wait for the autoscaler's new
	// nodes; while short of capacity it shows WaitingForNewNode, not NoResources.
	waitingForNode bool
}

func newPGEntry(info *pb.PlacementGroupInfo, request placement.Request) *pgEntry {
	return &pgEntry{id: info.PlacementGroupId, info: info, request: request, shapeKey: requestShapeKey(request)}
}

// changedLocked returns the channel closed at the group's next change, made on demand.
// Callers hold pgManager.mu.
func (e *pgEntry) changedLocked() chan struct{} {
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// rescheduling: the group holds some bundles and waits for the others.
func (e *pgEntry) rescheduling() bool {
	return e.info.State == pb.PlacementGroupState_RESCHEDULING
}

func (e *pgEntry) notify() {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

func (e *pgEntry) live() bool { return e.info.State != pb.PlacementGroupState_REMOVED }

// pgManager owns the placement-group table, the pending queue and the scheduler loop:
// the RPC handlers (placement_groups.go), the queue and its scheduling rounds
// (pg_scheduler.go), the two-phase reservation (pg_commit.go) and what happens to groups
// when nodes, jobs or the GCS itself come and go (pg_lifecycle.go).
// Concurrency: every field behind mu; raylet calls and listeners run outside it.
type pgManager struct {
	pb.UnimplementedPlacementGroupServiceServer
	pgDeps
	// listeners hear of removed and created groups (set before the loop starts).
	listeners []groupListener

	mu sync.Mutex
	// groups are the live groups; removed the REMOVED ones still listed.
	groups  map[string]*pgEntry
	removed map[string]*pgEntry
	// undos hold the bundles of undone reservations whose cancel a raylet has not
	// confirmed yet, by undo key (pg_commit.go): held in the view, apart from their group,
	// which may be placed again meanwhile.
	undos   map[string][]viewBundle
	undoSeq int64
	names   map[string]string // namespace \x00 name → id, live groups only
	seq     int64
	// queue holds the groups waiting to be placed (pg_queue.go).
	queue pendingQueue
	// workload learns the shapes of the bundles asked for (decaying): the scheduler
	// prefers placements that leave the free GPUs usable by them.
	workload *placement.WorkloadHistogram
	// admission is nil unless queues are configured (pg_admission.go).
	admission *admissionState
	// releases are bundles the loop's view still counts as held that were released
	// since its last round (pg_scheduler.go).
	releases []bundleRef
	// reconciling are the nodes a reconcile after a refused reservation runs for
	// (reconcileRefused).
	reconciling map[string]bool
	// evicting are the groups noticed of their preemption and not yet released, by id;
	// preemptRetryAt is when held-back groups ask for victims again (zero: no need).
	evicting map[string]*pgEntry
	// preemptions counts the notices given since this GCS started, by queue and reason
	// (raygo_queue_preemptions_total).
	preemptions map[[2]string]int
	// preemptionDecisions counts preemption.Decide's outcomes since this GCS started,
	// by outcome and cause (raygo_preemption_decisions_total).
	preemptionDecisions map[[2]string]int
	preemptRetryAt      time.Time
	// newCapacity is the autoscaler's last report of when the nodes it launches for
	// pending groups run, by group id (pg_preemption.go).
	newCapacity newCapacityReport
	wake        chan struct{}
	// lastPrune is when pruneRemoved last ran; it runs at most once a second.
	lastPrune time.Time
	// lastFlush is when every parked shape was last woken.
	lastFlush time.Time

	// view is the scheduler's view of the cluster (pg_snapshot.go), read and written only
	// under viewMu: the loop holds it for a whole round, a create placing its group at
	// once (placeNow) for its decision. viewMu is taken before mu, never while holding
	// it. viewStale asks for a rebuild.
	viewMu    sync.Mutex
	view      *clusterView
	viewStale atomic.Bool
	rounds    roundHistory
	// order registers each job's numbered creates in their order (pg_create_order.go).
	order createOrder
	// rides are removed groups' cancels waiting for a prepare-and-commit to their node
	// (pg_cancel_ride.go).
	rides cancelRides
}

// pgDeps is what the placement-group manager is given: the store, the node and job
// tables it reads, the raylets' side of the two-phase reservation, and the clock.
type pgDeps struct {
	// queues, when set, turns admission on (Config.Queues).
	queues   *queues.Config
	store    store.Store
	nodes    nodeDirectory
	jobs     jobDirectory
	reserver BundleReserver
	now      func() time.Time
	// stopped is closed when the GCS stops: timers that would remove groups stand down.
	stopped <-chan struct{}
	// metrics counts decisions and commits; nil counts nothing.
	metrics *pgMetrics
	log     zerolog.Logger
}

func newPGManager(deps pgDeps) *pgManager {
	m := &pgManager{pgDeps: deps, groups: map[string]*pgEntry{}, removed: map[string]*pgEntry{}, undos: map[string][]viewBundle{}, names: map[string]string{},
		evicting: map[string]*pgEntry{}, reconciling: map[string]bool{}, preemptions: map[[2]string]int{}, preemptionDecisions: map[[2]string]int{}, queue: newPendingQueue(), workload: placement.NewWorkloadHistogram(), wake: make(chan struct{}, 1)}
	if deps.queues != nil {
		m.admission = &admissionState{config: deps.queues, ledger: admission.NewLedger(), dirty: true}
	}
	return m
}

// subscribe adds a listener of removed and created groups; call it before Start serves.
func (m *pgManager) subscribe(l groupListener) { m.listeners = append(m.listeners, l) }

func nameKey(namespace, name string) string { return namespace + "\x00" + name }

// persistLocked writes a group's row. Callers hold mu, so rows reach the store in the
// order the state changed.
func (m *pgManager) persistLocked(e *pgEntry) error {
	return putRow(m.store, store.TablePlacementGroups, e.info.PlacementGroupId, "placement group "+e.info.PlacementGroupId, e.info)
}

func (m *pgManager) logPersistError(err error) {
	if err != nil {
		m.log.Error().Err(err).Msg("placement group table write failed")
	}
}

// parseBundles turns the stored or requested bundles into a scheduling request.
func parseBundles(strategy pb.PlacementStrategy, topology string, bundles []*pb.Bundle) (placement.Request, error) {
	spec := placement.RequestSpec{Strategy: strategy.String(), Topology: topology}
	hasSelector := false
	for _, b := range bundles {
		spec.Bundles = append(spec.Bundles, b.UnitResources)
		spec.BundleLabelSelector = append(spec.BundleLabelSelector, b.LabelSelector)
		hasSelector = hasSelector || len(b.LabelSelector) > 0
	}
	if !hasSelector {
		spec.BundleLabelSelector = nil
	}
	return placement.ParseRequest(spec)
}

// CreatePlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) CreatePlacementGroup(ctx context.Context, req *pb.CreatePlacementGroupRequest) (*pb.CreatePlacementGroupReply, error) {
	// A numbered create of a live job is registered after the ones numbered before it.
	ordered := req.ClientSeq > 0 && req.CreatorJobId != "" && m.jobs.get(req.CreatorJobId) != nil
	if ordered {
		if gap := m.order.await(ctx, req.CreatorJobId, req.ClientSeq); gap > 0 {
			m.log.Warn().Str("job_id", req.CreatorJobId).Int64("client_seq", req.ClientSeq).Int64("missing", gap).Msg("registering a numbered create without the ones numbered before it")
		}
	}
	// The removals riding on the create were asked for before it, and after the creates
	// numbered before it (which made the groups they name).
	var err error
	for _, id := range req.RemovePlacementGroupIds {
		if err = m.remove(id, removedByOwner); err != nil {
			break
		}
	}
	var e *pgEntry
	var reply *pb.PlacementGroupInfo
	if err == nil {
		e, reply, err = m.register(req)
	}
	if ordered {
		m.order.done(req.CreatorJobId, req.ClientSeq)
	}
	if err != nil {
		return nil, err
	}
	if req.WaitFirstAttemptMs <= 0 || reply.State == pb.PlacementGroupState_REMOVED {
		m.kick()
		return &pb.CreatePlacementGroupReply{PlacementGroup: reply}, nil
	}
	// The caller waits for the first attempt: make it here when nothing waits ahead of
	// the group, rather than in the loop's next round.
	if !m.placeNow(e) {
		m.flushRides() // the group may wait for the capacity they hold
		m.kick()
	}
	reply = m.waitFirstAttempt(ctx, e, reply.PlacementGroupId, time.Duration(min(req.WaitFirstAttemptMs, maxWaitFirstAttemptMs))*time.Millisecond)
	return &pb.CreatePlacementGroupReply{PlacementGroup: reply}, nil
}

// register validates a create and queues the new group (or, for an id the same creator
// already used, finds the group it made), returning it and a copy of its row. The caller
// tries the group or kicks the loop.
func (m *pgManager) register(req *pb.CreatePlacementGroupRequest) (*pgEntry, *pb.PlacementGroupInfo, error) {
	spec := placement.RequestSpec{Strategy: req.Strategy, Topology: req.Topology}
	hasSelector := false
	for _, b := range req.Bundles {
		spec.Bundles = append(spec.Bundles, b.GetResources())
		spec.BundleLabelSelector = append(spec.BundleLabelSelector, b.GetLabelSelector())
		hasSelector = hasSelector || len(b.GetLabelSelector()) > 0
	}
	if !hasSelector {
		spec.BundleLabelSelector = nil
	}
	request, err := placement.ParseRequest(spec)
	if err != nil {
		return nil, nil, errorf(fielderr.ErrInvalid, "%s", err.Error())
	}
	if req.Strategy == "" {
		return nil, nil, errorf(fielderr.ErrInvalid, "%s", "strategy: required: one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD")
	}
	if err := checkName("name", req.Name); err != nil {
		return nil, nil, err
	}
	if err := checkName("namespace", req.Namespace); err != nil {
		return nil, nil, err
	}
	if req.MaxRuntimeS < 0 || req.MaxRuntimeS > maxRuntimeLimitS {
		return nil, nil, errorf(fielderr.ErrInvalid, "max_runtime_s: must be from 0 (none) to %d (a year), got %d", maxRuntimeLimitS, req.MaxRuntimeS)
	}
	if req.Lifetime != "" && req.Lifetime != lifetimeDetached {
		return nil, nil, errorf(fielderr.ErrInvalid, "lifetime: must be empty (the creator's) or %q, got %q", lifetimeDetached, req.Lifetime)
	}
	detached := req.Lifetime == lifetimeDetached
	namespace := req.Namespace
	var jobIDBytes []byte
	if req.CreatorJobId != "" {
		job := m.jobs.get(req.CreatorJobId)
		if job == nil {
			return nil, nil, errorf(fielderr.ErrInvalid, "creator_job_id: no job %q", req.CreatorJobId)
		}
		if job.IsDead {
			return nil, nil, errorf(fielderr.ErrInvalid, "creator_job_id: job %s has finished", req.CreatorJobId)
		}
		if namespace == "" {
			namespace = job.Namespace
		}
		jobIDBytes, _ = hex.DecodeString(req.CreatorJobId)
	} else if !detached {
		return nil, nil, errorf(fielderr.ErrInvalid, "%s", "creator_job_id: required unless lifetime is \"detached\" (a group dies with the job that created it)")
	}
	if namespace == "" {
		namespace = "default"
	}
	id := req.PlacementGroupId
	if id == "" {
		id = newPlacementGroupID(jobIDBytes)
	} else if err := checkClientGroupID(id, jobIDBytes); err != nil {
		return nil, nil, err
	}
	now := m.now().UnixMilli()
	info := &pb.PlacementGroupInfo{
		PlacementGroupId: id, Name: req.Name, Namespace: namespace,
		Strategy: pb.PlacementStrategy(pb.PlacementStrategy_value[string(request.Strategy)]),
		State:    pb.PlacementGroupState_PENDING, CreatorJobId: req.CreatorJobId, IsDetached: detached, Topology: req.Topology,
		MaxRuntimeS: req.MaxRuntimeS,
		Stats:       &pb.PlacementGroupStats{SchedulingState: pb.SchedulingState_QUEUED, CreationRequestReceivedMs: now},
	}
	for i, b := range req.Bundles {
		info.Bundles = append(info.Bundles, &pb.Bundle{BundleIndex: int32(i), UnitResources: request.Bundles[i].ToFloat(), LabelSelector: b.GetLabelSelector()})
	}
	if err := m.resolveQueue(req, info); err != nil {
		return nil, nil, err
	}
	e := newPGEntry(info, request)
	e.queuedSince = time.UnixMilli(now)

	m.mu.Lock()
	if prior := m.lookupLocked(id); prior != nil {
		// A create sent again (its answer was lost): the group it made, never a second.
		if prior.info.CreatorJobId != req.CreatorJobId || prior.info.Namespace != namespace {
			m.mu.Unlock()
			return nil, nil, errorf(fielderr.ErrInvalid, "placement_group_id: %s is another group's id", id)
		}
		reply := proto.Clone(prior.info).(*pb.PlacementGroupInfo)
		m.mu.Unlock()
		return prior, reply, nil
	}
	if req.Name != "" {
		if _, taken := m.names[nameKey(namespace, req.Name)]; taken {
			m.mu.Unlock()
			return nil, nil, errorf(fielderr.ErrInvalid, "name: a placement group named %q already exists in namespace %q", req.Name, namespace)
		}
	}
	if err := m.persistLocked(e); err != nil {
		m.mu.Unlock()
		return nil, nil, errorf(errUnavailable, "%s", err.Error())
	}
	m.seq++
	e.seq = m.seq
	m.groups[id] = e
	if req.Name != "" {
		m.names[nameKey(namespace, req.Name)] = id
	}
	m.queue.add(e)
	m.observeLocked(request)
	if m.admission != nil {
		m.admission.dirty = true
	}
	reply := proto.Clone(info).(*pb.PlacementGroupInfo)
	m.mu.Unlock()
	m.log.Debug().Str("pg_id", id).Str("strategy", info.Strategy.String()).Int("bundles", len(info.Bundles)).Str("name", req.Name).Msg("placement group created")
	return e, reply, nil
}

// maxWaitFirstAttemptMs caps CreatePlacementGroupRequest.wait_first_attempt_ms.
const maxWaitFirstAttemptMs = 5000

// maxRuntimeLimitS caps CreatePlacementGroupRequest.max_runtime_s: a year.
const maxRuntimeLimitS = 365 * 24 * 3600

// Why groups are removed (PlacementGroupInfo.removal_reason).
const (
	removedByOwner    = "removed by its owner"
	removedJobDone    = "its job finished"
	removedRanTooLong = "ran for max_runtime_s=%d"
)

// runEndMs is when a group that declared max_runtime_s ends (Unix ms): that long after
// it first ran, or after nowMs while it has not run yet; ok is false without one.
func runEndMs(info *pb.PlacementGroupInfo, nowMs int64) (end int64, ok bool) {
	if info.MaxRuntimeS <= 0 {
		return 0, false
	}
	start := info.RunningSinceMs
	if start == 0 {
		start = nowMs
	}
	return start + info.MaxRuntimeS*1000, true
}

// expireLater removes a group once it has run for its max_runtime_s (at once when that
// is past, as after a GCS restart). Callers hold mu or own the entry.
func (m *pgManager) expireLater(e *pgEntry) {
	end, declared := runEndMs(e.info, 0)
	if !declared || e.info.RunningSinceMs == 0 {
		return
	}
	id, limit := e.info.PlacementGroupId, e.info.MaxRuntimeS
	time.AfterFunc(max(time.UnixMilli(end).Sub(m.now()), 0), func() {
		select {
		case <-m.stopped:
			return // the next GCS expires it
		default:
		}
		m.mu.Lock()
		live := m.groups[id] != nil
		m.mu.Unlock()
		if !live {
			return
		}
		m.log.Info().Str("pg_id", id).Int64("max_runtime_s", limit).Msg("placement group ran for its max_runtime_s; removing it")
		if err := m.remove(id, fmt.Sprintf(removedRanTooLong, limit)); err != nil {
			m.log.Error().Err(err).Str("pg_id", id).Msg("could not remove a group past its max_runtime_s; retrying")
			time.AfterFunc(time.Second, func() { m.expireLater(e) })
		}
	})
}

// waitFirstAttempt waits until a new group is CREATED or removed, or its first attempt
// failed (it says why it waits), or wait passed, and returns a copy of its row then.
func (m *pgManager) waitFirstAttempt(ctx context.Context, e *pgEntry, id string, wait time.Duration) *pb.PlacementGroupInfo {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		m.mu.Lock()
		state := e.info.State
		if state == pb.PlacementGroupState_CREATED || state == pb.PlacementGroupState_REMOVED || e.info.PendingReasonCode != "" {
			row := proto.Clone(e.info).(*pb.PlacementGroupInfo)
			m.mu.Unlock()
			return row
		}
		changed := e.changedLocked()
		m.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return m.info(id)
		case <-ctx.Done():
			return m.info(id)
		}
	}
}

// observeLocked feeds a new group's shapes to the workload histogram.
func (m *pgManager) observeLocked(request placement.Request) {
	m.workload.ObserveRequest(&request)
}

func newPlacementGroupID(jobID []byte) string {
	if len(jobID) != 4 {
		jobID = make([]byte, 4)
	}
	return ids.Random(placementGroupIDBytes) + hex.EncodeToString(jobID)
}

// checkClientGroupID checks a placement-group id chosen by the client: Ray's shape, 14
// bytes then the creator job's 4 (zero without a job), as lowercase hex.
func checkClientGroupID(id string, jobID []byte) error {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != placementGroupIDBytes+4 || hex.EncodeToString(raw) != id {
		return errorf(fielderr.ErrInvalid, "placement_group_id: must be %d lowercase hex characters, got %q", 2*(placementGroupIDBytes+4), id)
	}
	if len(jobID) != 4 {
		jobID = make([]byte, 4)
	}
	if tail := hex.EncodeToString(jobID); id[2*placementGroupIDBytes:] != tail {
		return errorf(fielderr.ErrInvalid, "placement_group_id: must end with the creator job's id %s, got %s", tail, id)
	}
	return nil
}

// RemovePlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) RemovePlacementGroup(ctx context.Context, req *pb.RemovePlacementGroupRequest) (*pb.RemovePlacementGroupReply, error) {
	if err := m.remove(req.PlacementGroupId, removedByOwner); err != nil {
		return nil, err
	}
	return &pb.RemovePlacementGroupReply{}, nil
}

// remove marks a group REMOVED (once) and releases its bundles: the raylets cancel them
// after remove returns. The removal is persisted before anything else changes: when the
// store refuses it, the group stays as it was and the error says so (a removal answered
// OK is never lost). A running two-phase commit sees the removal and cancels what it
// reserved.
func (m *pgManager) remove(id, reason string) error {
	m.mu.Lock()
	e := m.groups[id]
	if e == nil {
		m.mu.Unlock()
		return nil
	}
	byNode := bundlesByNode(e.info.PlacementGroupId, e.info.Bundles, nil)
	removed := proto.Clone(e.info).(*pb.PlacementGroupInfo)
	removed.State = pb.PlacementGroupState_REMOVED
	removed.Stats.SchedulingState = pb.SchedulingState_SCHEDULING_REMOVED
	removed.RemovedTimeMs = m.now().UnixMilli()
	removed.RemovalReason = reason
	removed.PendingReason, removed.PendingReasonCode, removed.RejectionSummaries = "", "", nil
	for _, b := range removed.Bundles {
		// Ray's table keeps a removed group's last node ids; nothing reads them as held,
		// since every use of a bundle's node skips REMOVED groups.
		b.NodeAddress, b.GpuIds, b.DeviceUuids, b.CudaVisibleDevices = "", nil, nil, ""
	}
	if err := putRow(m.store, store.TablePlacementGroups, id, "placement group "+id, removed); err != nil {
		m.mu.Unlock()
		return errorf(errUnavailable, "placement_group_id %s: not removed, the removal could not be saved: %v", id, err)
	}
	e.info = removed
	if e.info.Name != "" && m.names[nameKey(e.info.Namespace, e.info.Name)] == id {
		delete(m.names, nameKey(e.info.Namespace, e.info.Name))
	}
	m.queue.drop(e)
	m.returnChargeLocked(id)
	if e.eviction != nil && !e.eviction.releasing {
		delete(m.evicting, id)
		e.eviction = nil
	}
	delete(m.groups, id)
	m.removed[id] = e
	var rides []cancelRide
	for node, bundles := range byNode {
		rides = append(rides, cancelRide{e, node, bundles})
	}
	e.cancelling = len(rides) > 0
	e.notify()
	// A group on one node may wait for the next prepare-and-commit there to carry its
	// cancel, unless something waits for capacity.
	_, oneStep := m.reserver.(prepareCommitter)
	ride := oneStep && len(rides) == 1 && !m.waitingLocked()
	m.mu.Unlock()
	m.log.Debug().Str("pg_id", id).Str("reason", reason).Msg("placement group removed")
	// Its actors die first, so the raylet's reports of the workers that the cancel kills
	// are ignored.
	for _, l := range m.listeners {
		l.onPlacementGroupRemoved(id)
	}
	// The cancels run after the reply, as Ray's removal is asynchronous too; the
	// capacity is reused only once the raylets confirmed them. A bundle still in a
	// running two-phase commit is released by that commit's undo.
	if ride {
		m.rideCancel(rides[0])
	} else if len(rides) > 0 {
		go m.cancelNow(rides)
	}
	return nil
}

// info returns a copy of a group's row, or nil for an unknown group.
func (m *pgManager) info(id string) *pb.PlacementGroupInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.lookupLocked(id); e != nil {
		return proto.Clone(e.info).(*pb.PlacementGroupInfo)
	}
	return nil
}

// GetPlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) GetPlacementGroup(ctx context.Context, req *pb.GetPlacementGroupRequest) (*pb.GetPlacementGroupReply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.lookupLocked(req.PlacementGroupId)
	if e == nil {
		return &pb.GetPlacementGroupReply{}, nil
	}
	return &pb.GetPlacementGroupReply{PlacementGroup: proto.Clone(e.info).(*pb.PlacementGroupInfo)}, nil
}

// GetNamedPlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) GetNamedPlacementGroup(ctx context.Context, req *pb.GetNamedPlacementGroupRequest) (*pb.GetNamedPlacementGroupReply, error) {
	if req.Name == "" {
		return nil, errorf(fielderr.ErrInvalid, "%s", "name: required")
	}
	if err := checkName("name", req.Name); err != nil {
		return nil, err
	}
	if err := checkName("namespace", req.Namespace); err != nil {
		return nil, err
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = "default"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.names[nameKey(namespace, req.Name)]
	if !ok {
		return &pb.GetNamedPlacementGroupReply{}, nil
	}
	return &pb.GetNamedPlacementGroupReply{PlacementGroup: proto.Clone(m.groups[id].info).(*pb.PlacementGroupInfo)}, nil
}

// GetAllPlacementGroup implements pb.PlacementGroupServiceServer: in arrival order.
//
// The rows are encoded once, under mu, straight into the reply's wire form: the reply
// carries them as unknown fields (field placement_groups, encoded), which gRPC sends
// verbatim and every client decodes as the rows. Copying ten thousand rows and encoding
// the copies again would cost several times more. An in-process caller reads the rows by
// decoding the reply's wire form (proto.Marshal, then proto.Unmarshal).
func (m *pgManager) GetAllPlacementGroup(ctx context.Context, _ *pb.GetAllPlacementGroupRequest) (*pb.GetAllPlacementGroupReply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.sortedLocked(func(*pgEntry) bool { return true })
	rows := make([]*pb.PlacementGroupInfo, len(entries))
	for i, e := range entries {
		rows[i] = e.info
	}
	wire, err := encodeRows(rows)
	if err != nil {
		return nil, errorf(errInternal, "%s", err.Error())
	}
	reply := &pb.GetAllPlacementGroupReply{}
	reply.ProtoReflect().SetUnknown(wire)
	return reply, nil
}

// rowsPerEncoder is how many rows of GetAllPlacementGroup one goroutine encodes: a table
// of at most this many is encoded on the caller's goroutine.
const rowsPerEncoder = 1000

// encodeRows returns rows, in order, as the wire form of GetAllPlacementGroupReply's
// placement_groups field. A large table is encoded in chunks on up to GOMAXPROCS
// goroutines and joined in order. The rows are only read (each chunk's own messages
// cache their sizes), so callers holding the lock that guards them may call it.
func encodeRows(rows []*pb.PlacementGroupInfo) ([]byte, error) {
	const placementGroupsField = 1 // GetAllPlacementGroupReply.placement_groups
	encode := func(chunk []*pb.PlacementGroupInfo) ([]byte, error) {
		var wire []byte
		for _, row := range chunk {
			wire = protowire.AppendTag(wire, placementGroupsField, protowire.BytesType)
			wire = protowire.AppendVarint(wire, uint64(proto.Size(row)))
			var err error
			// Size cached the row's sizes just now.
			if wire, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(wire, row); err != nil {
				return nil, fmt.Errorf("encode placement group %s: %w", row.PlacementGroupId, err)
			}
		}
		return wire, nil
	}
	encoders := min(runtime.GOMAXPROCS(0), (len(rows)+rowsPerEncoder-1)/rowsPerEncoder)
	if encoders <= 1 {
		return encode(rows)
	}
	parts, errs := make([][]byte, encoders), make([]error, encoders)
	per := (len(rows) + encoders - 1) / encoders
	var wg sync.WaitGroup
	for i := range encoders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = encode(rows[i*per : min((i+1)*per, len(rows))])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(parts...), nil
}

// WaitPlacementGroupUntilReady implements pb.PlacementGroupServiceServer.
func (m *pgManager) WaitPlacementGroupUntilReady(ctx context.Context, req *pb.WaitPlacementGroupUntilReadyRequest) (*pb.WaitPlacementGroupUntilReadyReply, error) {
	for {
		m.mu.Lock()
		e := m.lookupLocked(req.PlacementGroupId)
		if e == nil {
			m.mu.Unlock()
			return nil, errNoSuchGroup(req.PlacementGroupId)
		}
		switch e.info.State {
		case pb.PlacementGroupState_CREATED:
			reply := &pb.WaitPlacementGroupUntilReadyReply{PlacementGroup: proto.Clone(e.info).(*pb.PlacementGroupInfo)}
			m.mu.Unlock()
			return reply, nil
		case pb.PlacementGroupState_REMOVED:
			m.mu.Unlock()
			return nil, errGroupRemoved(req.PlacementGroupId)
		}
		changed := e.changedLocked()
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, errorf(errNotReady, "placement group %s is not ready yet", req.PlacementGroupId)
		}
	}
}

// lookupLocked returns a group, live or removed, or nil.
func (m *pgManager) lookupLocked(id string) *pgEntry {
	if e := m.groups[id]; e != nil {
		return e
	}
	return m.removed[id]
}

// sortedLocked returns the entries, live and removed, that pass keep in arrival order.
func (m *pgManager) sortedLocked(keep func(*pgEntry) bool) []*pgEntry {
	var out []*pgEntry
	for _, table := range []map[string]*pgEntry{m.groups, m.removed} {
		for _, e := range table {
			if keep(e) {
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}
