package gcs

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
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
	info    *pb.PlacementGroupInfo // the persisted row
	request placement.Request      // the parsed bundles and selectors (constant)
	seq     int64                  // arrival order
	// inFlight holds the plan of a running two-phase commit, by bundle index.
	inFlight    map[int]placement.BundlePlacement
	nextAttempt time.Time
	backoff     time.Duration
	// changed is closed and replaced whenever the group's state changes.
	changed chan struct{}
}

func (e *pgEntry) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *pgEntry) live() bool { return e.info.State != pb.PlacementGroupState_REMOVED }

// pgManager owns the placement-group table, the pending queue and the scheduler loop.
// Concurrency: every field behind mu; raylet RPCs run outside it.
type pgManager struct {
	pb.UnimplementedPlacementGroupServiceServer
	server *Server

	mu     sync.Mutex
	groups map[string]*pgEntry
	names  map[string]string // namespace \x00 name → id, live groups only
	seq    int64
	wake   chan struct{}
	// lastPrune is when pruneRemoved last ran; it runs at most once a second.
	lastPrune time.Time
}

func newPGManager(s *Server) *pgManager {
	return &pgManager{server: s, groups: map[string]*pgEntry{}, names: map[string]string{}, wake: make(chan struct{}, 1)}
}

func nameKey(namespace, name string) string { return namespace + "\x00" + name }

// kick makes the scheduler loop run a round soon.
func (m *pgManager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// retryAllNow is called when capacity may have appeared: a node joined, resources
// were released.
func (m *pgManager) retryAllNow() {
	m.mu.Lock()
	for _, e := range m.groups {
		e.nextAttempt = time.Time{}
	}
	m.mu.Unlock()
	m.kick()
}

// persistLocked writes a group's row. Callers hold mu, so rows reach the store in the
// order the state changed.
func (m *pgManager) persistLocked(e *pgEntry) error {
	raw, err := proto.Marshal(e.info)
	if err != nil {
		return fmt.Errorf("encode placement group %s: %w", e.info.PlacementGroupId, err)
	}
	if err := m.server.store.Put(context.Background(), store.TablePlacementGroups, e.info.PlacementGroupId, raw); err != nil {
		return fmt.Errorf("persist placement group %s: %w", e.info.PlacementGroupId, err)
	}
	return nil
}

func (m *pgManager) logPersistError(err error) {
	if err != nil {
		m.server.log.Error().Err(err).Msg("placement group table write failed")
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

// load reads the placement-group table after a restart: pending groups are queued again,
// CREATED groups on dead nodes reschedule, PREPARED groups are committed or cancelled.
func (m *pgManager) load(ctx context.Context) (prepared []*pgEntry, err error) {
	alive := map[string]bool{}
	for _, n := range m.server.nodes.aliveNodes() {
		alive[n.NodeId] = true
	}
	rows, err := m.server.store.GetAll(ctx, store.TablePlacementGroups)
	if err != nil {
		return nil, fmt.Errorf("load placement group table: %w", err)
	}
	ids := make([]string, 0, len(rows))
	entries := map[string]*pgEntry{}
	for id, raw := range rows {
		info := &pb.PlacementGroupInfo{}
		if err := proto.Unmarshal(raw, info); err != nil {
			return nil, fmt.Errorf("load placement group table: group %s: %w", id, err)
		}
		request, err := parseBundles(info.Strategy, info.Topology, info.Bundles)
		if err != nil {
			return nil, fmt.Errorf("load placement group table: group %s: %w", id, err)
		}
		entries[id] = &pgEntry{info: info, request: request, changed: make(chan struct{})}
		ids = append(ids, id)
	}
	// Arrival order is the creation time, then the id.
	sort.Slice(ids, func(i, j int) bool {
		a, b := entries[ids[i]].info.Stats, entries[ids[j]].info.Stats
		if a.GetCreationRequestReceivedMs() != b.GetCreationRequestReceivedMs() {
			return a.GetCreationRequestReceivedMs() < b.GetCreationRequestReceivedMs()
		}
		return ids[i] < ids[j]
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		e := entries[id]
		m.seq++
		e.seq = m.seq
		m.groups[id] = e
		if !e.live() {
			continue
		}
		if e.info.Name != "" {
			m.names[nameKey(e.info.Namespace, e.info.Name)] = id
		}
		for _, b := range e.info.Bundles {
			if b.NodeId != "" && !alive[b.NodeId] {
				unplace(b)
				if e.info.State == pb.PlacementGroupState_CREATED {
					e.info.State = pb.PlacementGroupState_RESCHEDULING
				}
			}
		}
		if e.info.State == pb.PlacementGroupState_PREPARED {
			prepared = append(prepared, e)
		}
	}
	return prepared, nil
}

// recoverPrepared finishes the two-phase commits a dead GCS left half done: commit every
// bundle again (a commit is idempotent); if any node refuses, cancel them all and queue
// the group again. Never a double allocation: the raylets hold each bundle once.
func (m *pgManager) recoverPrepared(groups []*pgEntry) {
	for _, e := range groups {
		m.mu.Lock()
		id := e.info.PlacementGroupId
		byNode := bundlesByNode(e.info.PlacementGroupId, e.info.Bundles, nil)
		m.mu.Unlock()
		err := m.forEachNode(byNode, func(client pb.NodeManagerServiceClient, ctx context.Context, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
			reply, err := client.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: keysOf(bundles)})
			return reply.GetResources(), err
		})
		m.mu.Lock()
		if !e.live() || e.info.State != pb.PlacementGroupState_PREPARED {
			m.mu.Unlock()
			continue
		}
		if err == nil {
			m.markCreatedLocked(e)
			m.server.log.Info().Str("pg_id", id).Msg("recovered a PREPARED group: committed")
			m.mu.Unlock()
			continue
		}
		m.mu.Unlock()
		m.server.log.Warn().Err(err).Str("pg_id", id).Msg("recovered a PREPARED group: commit failed, cancelling and re-queueing")
		m.cancelAll(byNode)
		m.mu.Lock()
		if e.live() {
			for _, b := range e.info.Bundles {
				unplace(b)
			}
			e.info.State = pb.PlacementGroupState_PENDING
			e.info.Stats.SchedulingState = pb.SchedulingState_QUEUED
			m.logPersistError(m.persistLocked(e))
			e.notify()
		}
		m.mu.Unlock()
	}
	m.kick()
}

// onNodeDead releases a dead node's bundles in the GCS view: groups that had bundles
// there reschedule just those bundles.
func (m *pgManager) onNodeDead(nodeID string) {
	m.mu.Lock()
	for _, e := range m.groups {
		if !e.live() {
			continue
		}
		lost := 0
		for _, b := range e.info.Bundles {
			if b.NodeId == nodeID {
				unplace(b)
				lost++
			}
		}
		if lost == 0 || e.info.State != pb.PlacementGroupState_CREATED {
			// A PREPARED group's running commit fails on the dead node and re-queues it.
			if lost > 0 {
				m.logPersistError(m.persistLocked(e))
			}
			continue
		}
		e.info.State = pb.PlacementGroupState_RESCHEDULING
		e.info.Stats.SchedulingState = pb.SchedulingState_QUEUED
		e.nextAttempt = time.Time{}
		e.backoff = 0
		m.logPersistError(m.persistLocked(e))
		e.notify()
		m.server.log.Warn().Str("pg_id", e.info.PlacementGroupId).Str("node_id", nodeID).Int("lost_bundles", lost).Msg("placement group RESCHEDULING")
	}
	m.mu.Unlock()
	m.kick()
}

// onJobDead removes the non-detached groups the job created.
func (m *pgManager) onJobDead(job *pb.JobInfo) {
	m.mu.Lock()
	var ids []string
	for id, e := range m.groups {
		if e.live() && !e.info.IsDetached && e.info.CreatorJobId == job.JobId {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.server.log.Info().Str("pg_id", id).Str("job_id", job.JobId).Msg("removing the group of a finished job")
		m.remove(id)
	}
}

// onNodeConnected reconciles a raylet that registered or reconnected to this GCS: it
// releases what older GCS incarnations reserved there and this one does not know.
func (m *pgManager) onNodeConnected(node *pb.NodeInfo) {
	m.mu.Lock()
	var inUse []*pb.BundleKey
	for id, e := range m.groups {
		if !e.live() {
			continue
		}
		for _, b := range e.info.Bundles {
			if b.NodeId == node.NodeId {
				inUse = append(inUse, &pb.BundleKey{PlacementGroupId: id, BundleIndex: b.BundleIndex, Generation: b.Generation})
			}
		}
		for index, p := range e.inFlight {
			if string(p.NodeID) == node.NodeId {
				b := e.info.Bundles[index]
				inUse = append(inUse, &pb.BundleKey{PlacementGroupId: id, BundleIndex: b.BundleIndex, Generation: b.Generation + 1})
			}
		}
	}
	m.mu.Unlock()
	client, err := m.server.nodes.rayletClient(node.NodeId)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rayletCallTimeout)
	defer cancel()
	reply, err := client.ReleaseUnusedBundles(ctx, &pb.ReleaseUnusedBundlesRequest{InUse: inUse})
	if err != nil {
		m.server.log.Warn().Err(err).Str("node_id", node.NodeId).Msg("could not reconcile the raylet's bundles")
		return
	}
	m.server.nodes.applyResourceReport(node.NodeId, reply.Resources)
	if len(reply.Released) > 0 {
		m.server.log.Info().Str("node_id", node.NodeId).Int("released", len(reply.Released)).Int("held", len(reply.Held)).Msg("released orphaned bundles")
		m.retryAllNow()
	}
}

// CreatePlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) CreatePlacementGroup(ctx context.Context, req *pb.CreatePlacementGroupRequest) (*pb.CreatePlacementGroupReply, error) {
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
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.Strategy == "" {
		return nil, status.Error(codes.InvalidArgument, "strategy: required: one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD")
	}
	if req.Lifetime != "" && req.Lifetime != lifetimeDetached {
		return nil, status.Errorf(codes.InvalidArgument, "lifetime: must be empty (the creator's) or %q, got %q", lifetimeDetached, req.Lifetime)
	}
	detached := req.Lifetime == lifetimeDetached
	namespace := req.Namespace
	var jobIDBytes []byte
	if req.CreatorJobId != "" {
		job := m.server.jobs.get(req.CreatorJobId)
		if job == nil {
			return nil, status.Errorf(codes.InvalidArgument, "creator_job_id: no job %q", req.CreatorJobId)
		}
		if job.IsDead {
			return nil, status.Errorf(codes.InvalidArgument, "creator_job_id: job %s has finished", req.CreatorJobId)
		}
		if namespace == "" {
			namespace = job.Namespace
		}
		jobIDBytes, _ = hex.DecodeString(req.CreatorJobId)
	} else if !detached {
		return nil, status.Error(codes.InvalidArgument, "creator_job_id: required unless lifetime is \"detached\" (a group dies with the job that created it)")
	}
	if namespace == "" {
		namespace = "default"
	}
	id := newPlacementGroupID(jobIDBytes)
	now := m.server.nowMs()
	info := &pb.PlacementGroupInfo{
		PlacementGroupId: id, Name: req.Name, Namespace: namespace,
		Strategy: pb.PlacementStrategy(pb.PlacementStrategy_value[string(request.Strategy)]),
		State:    pb.PlacementGroupState_PENDING, CreatorJobId: req.CreatorJobId, IsDetached: detached, Topology: req.Topology,
		Stats: &pb.PlacementGroupStats{SchedulingState: pb.SchedulingState_QUEUED, CreationRequestReceivedMs: now},
	}
	for i, b := range req.Bundles {
		info.Bundles = append(info.Bundles, &pb.Bundle{BundleIndex: int32(i), UnitResources: request.Bundles[i].ToFloat(), LabelSelector: b.GetLabelSelector()})
	}
	e := &pgEntry{info: info, request: request, changed: make(chan struct{})}

	m.mu.Lock()
	if req.Name != "" {
		if _, taken := m.names[nameKey(namespace, req.Name)]; taken {
			m.mu.Unlock()
			return nil, status.Errorf(codes.InvalidArgument, "name: a placement group named %q already exists in namespace %q", req.Name, namespace)
		}
	}
	if err := m.persistLocked(e); err != nil {
		m.mu.Unlock()
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	m.seq++
	e.seq = m.seq
	m.groups[id] = e
	if req.Name != "" {
		m.names[nameKey(namespace, req.Name)] = id
	}
	reply := proto.Clone(info).(*pb.PlacementGroupInfo)
	m.mu.Unlock()
	m.kick()
	m.server.log.Info().Str("pg_id", id).Str("strategy", info.Strategy.String()).Int("bundles", len(info.Bundles)).Str("name", req.Name).Msg("placement group created")
	return &pb.CreatePlacementGroupReply{PlacementGroup: reply}, nil
}

func newPlacementGroupID(jobID []byte) string {
	if len(jobID) != 4 {
		jobID = make([]byte, 4)
	}
	return ids.Random(placementGroupIDBytes) + hex.EncodeToString(jobID)
}

// RemovePlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) RemovePlacementGroup(ctx context.Context, req *pb.RemovePlacementGroupRequest) (*pb.RemovePlacementGroupReply, error) {
	m.remove(req.PlacementGroupId)
	return &pb.RemovePlacementGroupReply{}, nil
}

// remove marks a group REMOVED (once) and releases its bundles. A running two-phase
// commit sees the removal and cancels what it reserved.
func (m *pgManager) remove(id string) {
	m.mu.Lock()
	e := m.groups[id]
	if e == nil || !e.live() {
		m.mu.Unlock()
		return
	}
	byNode := bundlesByNode(e.info.PlacementGroupId, e.info.Bundles, nil)
	e.info.State = pb.PlacementGroupState_REMOVED
	e.info.Stats.SchedulingState = pb.SchedulingState_SCHEDULING_REMOVED
	e.info.RemovedTimeMs = m.server.nowMs()
	e.info.PendingReason, e.info.NodeRejections = "", nil
	for _, b := range e.info.Bundles {
		// Ray's table keeps a removed group's last node ids; nothing reads them as held,
		// since every use of a bundle's node skips REMOVED groups.
		b.NodeAddress, b.GpuIds, b.DeviceUuids, b.CudaVisibleDevices = "", nil, nil, ""
	}
	if e.info.Name != "" && m.names[nameKey(e.info.Namespace, e.info.Name)] == id {
		delete(m.names, nameKey(e.info.Namespace, e.info.Name))
	}
	m.logPersistError(m.persistLocked(e))
	e.notify()
	m.mu.Unlock()
	m.server.log.Info().Str("pg_id", id).Msg("placement group removed")
	// Its actors die first, so the raylet's reports of the workers that the cancel kills
	// are ignored.
	m.server.actors.onPlacementGroupRemoved(id)
	m.cancelAll(byNode)
	m.retryAllNow()
}

// info returns a copy of a group's row, or nil for an unknown group.
func (m *pgManager) info(id string) *pb.PlacementGroupInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.groups[id]; e != nil {
		return proto.Clone(e.info).(*pb.PlacementGroupInfo)
	}
	return nil
}

// GetPlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) GetPlacementGroup(ctx context.Context, req *pb.GetPlacementGroupRequest) (*pb.GetPlacementGroupReply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.groups[req.PlacementGroupId]
	if e == nil {
		return &pb.GetPlacementGroupReply{}, nil
	}
	return &pb.GetPlacementGroupReply{PlacementGroup: proto.Clone(e.info).(*pb.PlacementGroupInfo)}, nil
}

// GetNamedPlacementGroup implements pb.PlacementGroupServiceServer.
func (m *pgManager) GetNamedPlacementGroup(ctx context.Context, req *pb.GetNamedPlacementGroupRequest) (*pb.GetNamedPlacementGroupReply, error) {
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
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
func (m *pgManager) GetAllPlacementGroup(ctx context.Context, _ *pb.GetAllPlacementGroupRequest) (*pb.GetAllPlacementGroupReply, error) {
	m.mu.Lock()
	entries := m.sortedLocked(func(*pgEntry) bool { return true })
	out := make([]*pb.PlacementGroupInfo, len(entries))
	for i, e := range entries {
		out[i] = proto.Clone(e.info).(*pb.PlacementGroupInfo)
	}
	m.mu.Unlock()
	return &pb.GetAllPlacementGroupReply{PlacementGroups: out}, nil
}

// WaitPlacementGroupUntilReady implements pb.PlacementGroupServiceServer.
func (m *pgManager) WaitPlacementGroupUntilReady(ctx context.Context, req *pb.WaitPlacementGroupUntilReadyRequest) (*pb.WaitPlacementGroupUntilReadyReply, error) {
	for {
		m.mu.Lock()
		e := m.groups[req.PlacementGroupId]
		if e == nil {
			m.mu.Unlock()
			return nil, status.Errorf(codes.NotFound, "placement_group_id %s: no such placement group", req.PlacementGroupId)
		}
		switch e.info.State {
		case pb.PlacementGroupState_CREATED:
			reply := &pb.WaitPlacementGroupUntilReadyReply{PlacementGroup: proto.Clone(e.info).(*pb.PlacementGroupInfo)}
			m.mu.Unlock()
			return reply, nil
		case pb.PlacementGroupState_REMOVED:
			m.mu.Unlock()
			return nil, status.Errorf(codes.FailedPrecondition, "placement_group_id %s: placement group was removed", req.PlacementGroupId)
		}
		changed := e.changed
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.Errorf(codes.DeadlineExceeded, "placement group %s is not ready yet", req.PlacementGroupId)
		}
	}
}

// sortedLocked returns the entries that pass keep in arrival order.
func (m *pgManager) sortedLocked(keep func(*pgEntry) bool) []*pgEntry {
	var out []*pgEntry
	for _, e := range m.groups {
		if keep(e) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// loop runs scheduling rounds when woken, when a retry is due, and at least every second.
func (m *pgManager) loop(stop <-chan struct{}) {
	for {
		wait := m.scheduleRound()
		m.pruneRemoved()
		select {
		case <-stop:
			return
		case <-m.wake:
		case <-time.After(wait):
		}
	}
}

// scheduleRound tries every pending group whose retry is due, in queue order (groups
// rescheduling lost bundles first, then arrival order), against one snapshot that each
// successful plan updates. It returns how long until the next retry is due.
func (m *pgManager) scheduleRound() time.Duration {
	nodes := m.server.nodes.aliveNodes()
	now := time.Now()
	next := time.Second

	m.mu.Lock()
	defer m.mu.Unlock()
	queue := m.sortedLocked(func(e *pgEntry) bool {
		return e.inFlight == nil && (e.info.State == pb.PlacementGroupState_PENDING || e.info.State == pb.PlacementGroupState_RESCHEDULING)
	})
	if len(queue) == 0 {
		return next
	}
	sort.SliceStable(queue, func(i, j int) bool {
		return queue[i].info.State == pb.PlacementGroupState_RESCHEDULING && queue[j].info.State != pb.PlacementGroupState_RESCHEDULING
	})
	snapshot, err := m.snapshotLocked(nodes)
	if err != nil {
		m.server.log.Error().Err(err).Msg("cannot build a cluster snapshot")
		return next
	}
	for _, e := range queue {
		if e.nextAttempt.After(now) {
			if d := e.nextAttempt.Sub(now); d < next {
				next = d
			}
			continue
		}
		m.attemptLocked(e, snapshot, now)
	}
	return next
}

// snapshotLocked builds the scheduler's view: alive nodes, their totals and GPUs, and what
// is available once every bundle the GCS placed (or is placing) is subtracted.
func (m *pgManager) snapshotLocked(nodes []*pb.NodeInfo) (*placement.Snapshot, error) {
	reserved := map[string]placement.ResourceSet{}
	gpuUsed := map[string]map[int]placement.Amount{} // node → GPU index → share held
	hold := func(node string, bundle placement.ResourceSet, gpus []int) {
		reserved[node] = reserved[node].Add(bundle)
		if len(gpus) == 0 {
			return
		}
		if gpuUsed[node] == nil {
			gpuUsed[node] = map[int]placement.Amount{}
		}
		// Each GPU of a bundle holds one whole GPU, or the bundle's fraction of it.
		share := min(bundle["GPU"], placement.AmountScale)
		for _, gpu := range gpus {
			gpuUsed[node][gpu] += share
		}
	}
	for _, e := range m.groups {
		if !e.live() {
			continue
		}
		for i, b := range e.info.Bundles {
			if b.NodeId != "" {
				gpus := make([]int, len(b.GpuIds))
				for j, id := range b.GpuIds {
					gpus[j] = int(id)
				}
				hold(b.NodeId, e.request.Bundles[i], gpus)
			}
		}
		for i, p := range e.inFlight {
			hold(string(p.NodeID), e.request.Bundles[i], p.GPUIndices)
		}
	}
	rows := make([]placement.Node, 0, len(nodes))
	for _, n := range nodes {
		total, err := placement.ResourceSetFromFloat(n.ResourcesTotal)
		if err != nil {
			return nil, fmt.Errorf("node %s resources_total: %w", n.NodeId, err)
		}
		available := total.Clone()
		for name, amount := range reserved[n.NodeId] {
			available[name] = max(available[name]-amount, 0)
		}
		labels := maps.Clone(n.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[placement.NodeIDLabel] = n.NodeId
		rows = append(rows, placement.Node{ID: placement.NodeID(n.NodeId), Total: total, Available: available,
			Labels: labels, Alive: true, Draining: n.IsDraining,
			GPUs: topologyGPUs(n, gpuUsed[n.NodeId]), NVLinkDomain: n.NvlinkDomain, MIGGPUs: migGPUs(n)})
	}
	return placement.NewSnapshot(rows)
}

// migGPUs is a node's MIG slot maps as its raylet last reported them. The raylet checks
// every step again, so a plan made on a report that an in-flight prepare has outdated
// fails its prepare and is retried, never double-booked.
func migGPUs(n *pb.NodeInfo) []placement.MIGGPU {
	var out []placement.MIGGPU
	for _, g := range n.MigGpus {
		model, ok := placement.MIGModelOfDevice(g.Model)
		if !ok {
			continue
		}
		gpu := placement.MIGGPU{Index: int(g.Index), Model: model}
		for _, in := range g.Instances {
			state := placement.MIGIdle
			if in.Held {
				state = placement.MIGHeld
			}
			gpu.Instances = append(gpu.Instances, placement.MIGInstance{ProfileID: int(in.ProfileId), Start: int(in.Start), State: state})
		}
		out = append(out, gpu)
	}
	return out
}

// topologyGPUs lists a node's GPUs for the scheduler with what is free of each. GPUs the
// raylet only counted (--num-gpus without NVML: no UUID, no topology), or a list that does
// not match the node's GPU total, are not passed: the node is then scheduled by its GPU
// count and the raylet picks the indices, rather than one odd node failing the snapshot.
func topologyGPUs(n *pb.NodeInfo, used map[int]placement.Amount) []placement.GPU {
	if float64(len(n.Gpus)) != n.ResourcesTotal["GPU"] {
		return nil
	}
	gpus := make([]placement.GPU, 0, len(n.Gpus))
	for _, g := range n.Gpus {
		if g.Uuid == "" {
			return nil
		}
		gpus = append(gpus, placement.GPU{Index: int(g.Index), UUID: g.Uuid, NVLinkIsland: int(g.NvlinkIsland),
			Rail: int(g.Rail), Available: max(placement.AmountScale-used[int(g.Index)], 0)})
	}
	return gpus
}

// attemptLocked schedules one group; on a plan it reserves it in the snapshot and starts
// the two-phase commit.
func (m *pgManager) attemptLocked(e *pgEntry, snapshot *placement.Snapshot, now time.Time) {
	stats := e.info.Stats
	stats.SchedulingAttempt++
	if stats.SchedulingStartedTimeMs == 0 {
		stats.SchedulingStartedTimeMs = now.UnixMilli()
	}
	request := e.request
	request.PlacedBundles = map[int]placement.NodeID{}
	for i, b := range e.info.Bundles {
		if b.NodeId != "" {
			request.PlacedBundles[i] = placement.NodeID(b.NodeId)
		}
	}
	plan, err := placement.Schedule(snapshot, request)
	if err != nil {
		m.recordUnschedulableLocked(e, err, now)
		return
	}
	if err := snapshot.Reserve(request.Bundles, plan); err != nil {
		m.server.log.Error().Err(err).Str("pg_id", e.info.PlacementGroupId).Msg("plan does not fit its own snapshot")
		return
	}
	e.inFlight = map[int]placement.BundlePlacement{}
	for _, p := range plan.Placements {
		e.inFlight[p.BundleIndex] = p
	}
	stats.SchedulingState = pb.SchedulingState_SCHEDULING_STARTED
	e.info.PendingReason, e.info.NodeRejections = "", nil
	go m.twoPhaseCommit(e, maps.Clone(e.inFlight))
}

func (m *pgManager) recordUnschedulableLocked(e *pgEntry, err error, now time.Time) {
	var unschedulable *placement.UnschedulableError
	state := pb.SchedulingState_NO_RESOURCES
	if errors.As(err, &unschedulable) {
		if unschedulable.Kind == placement.Infeasible {
			state = pb.SchedulingState_INFEASIBLE
		}
		ids := make([]string, 0, len(unschedulable.NodeReasons))
		for id := range unschedulable.NodeReasons {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		e.info.NodeRejections = e.info.NodeRejections[:0]
		for _, id := range ids {
			var reasons []string
			for _, r := range unschedulable.NodeReasons[placement.NodeID(id)] {
				reasons = append(reasons, r.String())
			}
			e.info.NodeRejections = append(e.info.NodeRejections, &pb.NodeRejection{NodeId: id, Reasons: reasons})
		}
	}
	changed := e.info.Stats.SchedulingState != state || e.info.PendingReason != err.Error()
	e.info.Stats.SchedulingState = state
	e.info.PendingReason = err.Error()
	m.backoffLocked(e, now)
	if changed {
		m.logPersistError(m.persistLocked(e))
	}
}

func (m *pgManager) backoffLocked(e *pgEntry, now time.Time) {
	if e.backoff == 0 {
		e.backoff = retryBackoffMin
	} else {
		e.backoff = min(2*e.backoff, retryBackoffMax)
	}
	e.nextAttempt = now.Add(e.backoff)
	if ms := float64(e.backoff.Milliseconds()); ms > e.info.Stats.HighestRetryDelayMs {
		e.info.Stats.HighestRetryDelayMs = ms
	}
}

// bundlesByNode groups group id's placed bundles (or, with plan, the planned ones at
// their next generation) by node.
func bundlesByNode(id string, bundles []*pb.Bundle, plan map[int]placement.BundlePlacement) map[string][]*pb.BundleReservation {
	out := map[string][]*pb.BundleReservation{}
	for i, b := range bundles {
		node, generation, gpus := b.NodeId, b.Generation, b.GpuIds
		var mig *pb.MIGStep
		if plan != nil {
			p, ok := plan[i]
			if !ok {
				continue
			}
			node, generation, gpus = string(p.NodeID), generation+1, nil
			if mig = migStep(p.MIG); mig == nil {
				for _, gpu := range p.GPUIndices {
					gpus = append(gpus, int32(gpu))
				}
			}
		}
		if node == "" {
			continue
		}
		out[node] = append(out[node], &pb.BundleReservation{
			Key:       &pb.BundleKey{PlacementGroupId: id, BundleIndex: b.BundleIndex, Generation: generation},
			Resources: b.UnitResources, GpuIds: gpus, Mig: mig,
		})
	}
	return out
}

// migStep is the raylet's form of a scheduler MIG step (nil for none).
func migStep(step *placement.MIGStep) *pb.MIGStep {
	if step == nil {
		return nil
	}
	out := &pb.MIGStep{Gpu: int32(step.GPU), ProfileId: int32(step.Profile.ID), Start: int32(step.Start), ReuseIdle: step.Action == placement.MIGReuseIdle}
	for _, idle := range step.Destroy {
		out.DestroyStarts = append(out.DestroyStarts, int32(idle.Start))
	}
	return out
}

// unplace forgets where a bundle was.
func unplace(b *pb.Bundle) {
	b.NodeId, b.NodeAddress, b.GpuIds, b.DeviceUuids, b.CudaVisibleDevices = "", "", nil, nil, ""
}

// cudaVisibleDevices is the CUDA_VISIBLE_DEVICES value of a bundle: its MIG device UUIDs
// when it has MIG slices, else its GPUs' NVML indices (with CUDA_DEVICE_ORDER=PCI_BUS_ID,
// CUDA numbers GPUs as NVML does).
func cudaVisibleDevices(r *pb.BundleReservation) string {
	if r.Mig != nil {
		return strings.Join(r.DeviceUuids, ",")
	}
	parts := make([]string, len(r.GpuIds))
	for i, id := range r.GpuIds {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

func keysOf(bundles []*pb.BundleReservation) []*pb.BundleKey {
	keys := make([]*pb.BundleKey, len(bundles))
	for i, b := range bundles {
		keys[i] = b.Key
	}
	return keys
}

// forEachNode calls fn on every node's raylet in parallel, records the resource report
// each returns, and returns the first error.
func (m *pgManager) forEachNode(byNode map[string][]*pb.BundleReservation, fn func(pb.NodeManagerServiceClient, context.Context, []*pb.BundleReservation) (*pb.ResourceReport, error)) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode))
	for node, bundles := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client, err := m.server.nodes.rayletClient(node)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), rayletCallTimeout)
				var report *pb.ResourceReport
				report, err = fn(client, ctx, bundles)
				cancel()
				m.server.nodes.applyResourceReport(node, report)
			}
			if err != nil {
				errs <- fmt.Errorf("node %s: %w", node, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// cancelAll releases bundles everywhere, best effort (a dead node holds nothing).
func (m *pgManager) cancelAll(byNode map[string][]*pb.BundleReservation) {
	err := m.forEachNode(byNode, func(client pb.NodeManagerServiceClient, ctx context.Context, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
		reply, err := client.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: keysOf(bundles)})
		return reply.GetResources(), err
	})
	if err != nil {
		m.server.log.Debug().Err(err).Msg("cancel did not reach every raylet")
	}
}

// twoPhaseCommit reserves a plan: prepare everywhere; all prepared → persist PREPARED →
// commit everywhere → persist CREATED. Any failure cancels everything the plan reserved
// and the group goes back to the queue with backoff.
func (m *pgManager) twoPhaseCommit(e *pgEntry, plan map[int]placement.BundlePlacement) {
	m.mu.Lock()
	id := e.info.PlacementGroupId
	byNode := bundlesByNode(id, e.info.Bundles, plan)
	m.mu.Unlock()

	var madeMu sync.Mutex
	made := map[int32]*pb.BundleReservation{} // bundle index → reservation with its GPUs
	err := m.forEachNode(byNode, func(client pb.NodeManagerServiceClient, ctx context.Context, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
		reply, err := client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: bundles})
		madeMu.Lock()
		for _, r := range reply.GetBundles() {
			if r != nil {
				made[r.Key.BundleIndex] = r
			}
		}
		madeMu.Unlock()
		return reply.GetResources(), err
	})
	if err != nil {
		m.requeuePlan(e, plan, byNode, fmt.Errorf("prepare: %w", err))
		return
	}

	m.mu.Lock()
	if !e.live() {
		m.mu.Unlock()
		m.requeuePlan(e, plan, byNode, errors.New("removed while being placed"))
		return
	}
	for index, p := range plan {
		b := e.info.Bundles[index]
		b.NodeId = string(p.NodeID)
		b.NodeAddress = m.server.nodes.rayletAddress(b.NodeId)
		b.Generation++
		if r := made[b.BundleIndex]; r != nil {
			b.GpuIds, b.DeviceUuids = r.GpuIds, r.DeviceUuids
			b.CudaVisibleDevices = cudaVisibleDevices(r)
		}
	}
	e.inFlight = nil
	e.info.State = pb.PlacementGroupState_PREPARED
	if err := m.persistLocked(e); err != nil {
		m.mu.Unlock()
		m.requeuePlan(e, plan, byNode, err)
		return
	}
	e.notify()
	m.mu.Unlock()

	if hook := m.server.cfg.TestHookAfterPrepare; hook != nil {
		hook(id)
	}

	err = m.forEachNode(byNode, func(client pb.NodeManagerServiceClient, ctx context.Context, bundles []*pb.BundleReservation) (*pb.ResourceReport, error) {
		reply, err := client.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: keysOf(bundles)})
		return reply.GetResources(), err
	})
	if err != nil {
		m.requeuePlan(e, plan, byNode, fmt.Errorf("commit: %w", err))
		return
	}
	m.mu.Lock()
	if !e.live() {
		m.mu.Unlock()
		m.cancelAll(byNode) // remove() cancelled too; cancels are idempotent
		return
	}
	if e.info.State == pb.PlacementGroupState_PREPARED {
		m.markCreatedLocked(e)
	}
	m.mu.Unlock()
	m.server.log.Info().Str("pg_id", id).Int("bundles", len(plan)).Msg("placement group CREATED")
}

// markCreatedLocked finishes a group: CREATED, stats, persisted, waiters woken. If a
// node died while the group was PREPARED, the group reschedules the lost bundles instead.
func (m *pgManager) markCreatedLocked(e *pgEntry) {
	now := m.server.nowMs()
	stats := e.info.Stats
	e.info.State = pb.PlacementGroupState_CREATED
	for _, b := range e.info.Bundles {
		if b.NodeId == "" {
			e.info.State = pb.PlacementGroupState_RESCHEDULING
		}
	}
	if e.info.State == pb.PlacementGroupState_CREATED {
		stats.SchedulingState = pb.SchedulingState_FINISHED
		if stats.EndToEndCreationLatencyMs == 0 {
			stats.EndToEndCreationLatencyMs = float64(now - stats.CreationRequestReceivedMs)
			stats.SchedulingLatencyMs = float64(now - stats.SchedulingStartedTimeMs)
		}
	} else {
		stats.SchedulingState = pb.SchedulingState_QUEUED
	}
	e.backoff, e.nextAttempt = 0, time.Time{}
	e.info.PendingReason, e.info.NodeRejections = "", nil
	m.logPersistError(m.persistLocked(e))
	e.notify()
	if e.info.State == pb.PlacementGroupState_CREATED {
		m.server.actors.retryAllNow() // actors waiting for its bundles
	}
}

// requeuePlan undoes a plan whose prepare or commit failed (or whose group was removed
// meanwhile): cancel everywhere, unplace the plan's bundles, and queue the group again
// with backoff — PENDING, or RESCHEDULING when it still holds other bundles.
func (m *pgManager) requeuePlan(e *pgEntry, plan map[int]placement.BundlePlacement, byNode map[string][]*pb.BundleReservation, cause error) {
	m.cancelAll(byNode)
	m.mu.Lock()
	e.inFlight = nil
	if e.live() {
		e.info.State = pb.PlacementGroupState_PENDING
		for i, b := range e.info.Bundles {
			if _, inPlan := plan[i]; inPlan {
				unplace(b)
			} else if b.NodeId != "" {
				e.info.State = pb.PlacementGroupState_RESCHEDULING
			}
		}
		e.info.Stats.SchedulingState = pb.SchedulingState_FAILED_TO_COMMIT_RESOURCES
		e.info.PendingReason = "reservation failed, retrying: " + cause.Error()
		m.backoffLocked(e, time.Now())
		m.logPersistError(m.persistLocked(e))
		e.notify()
	}
	m.mu.Unlock()
	m.server.log.Info().Err(cause).Str("pg_id", e.info.PlacementGroupId).Msg("placement group reservation failed; re-queued")
	m.kick()
}

// pruneRemoved forgets REMOVED groups beyond the retention count or age.
func (m *pgManager) pruneRemoved() {
	if time.Since(m.lastPrune) < time.Second {
		return
	}
	m.lastPrune = time.Now()
	cutoff := m.server.nowMs() - removedGroupRetention.Milliseconds()
	m.mu.Lock()
	removed := m.sortedLocked(func(e *pgEntry) bool { return !e.live() })
	var drop []string
	for i, e := range removed {
		if len(removed)-i > maxRemovedGroupsKept || e.info.RemovedTimeMs < cutoff {
			drop = append(drop, e.info.PlacementGroupId)
			delete(m.groups, e.info.PlacementGroupId)
		}
	}
	m.mu.Unlock()
	if len(drop) > 0 {
		if _, err := m.server.store.Delete(context.Background(), store.TablePlacementGroups, drop...); err != nil {
			m.server.log.Error().Err(err).Msg("could not delete removed placement groups")
		}
	}
}
