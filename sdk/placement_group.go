package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/stateapi"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Bundle is one bundle's resources: name → amount (multiples of 1/10000).
type Bundle map[string]float64

// Strategy is a placement strategy, with Ray's names and meanings.
type Strategy string

const (
	// Pack puts the bundles on as few nodes as possible, best effort.
	Pack Strategy = "PACK"
	// Spread puts the bundles on distinct nodes while it can, best effort.
	Spread Strategy = "SPREAD"
	// StrictPack puts every bundle on one node.
	StrictPack Strategy = "STRICT_PACK"
	// StrictSpread puts every bundle on a distinct node.
	StrictSpread Strategy = "STRICT_SPREAD"
)

// PlacementGroupOption changes how a group is created.
type PlacementGroupOption func(*pb.CreatePlacementGroupRequest)

// WithName names the group; names are unique within the job's namespace.
func WithName(name string) PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) { r.Name = name }
}

// Detached makes the group outlive the job that created it (Ray's lifetime="detached").
func Detached() PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) { r.Lifetime = "detached" }
}

// NodeTopology gives the strategy Ray's plain meaning, by nodes alone, instead of raygo's
// GPU topology: STRICT_PACK puts every bundle on one node instead of every whole GPU in
// one NVLink island; PACK does not fill islands first; SPREAD and STRICT_SPREAD prefer
// no scalable unit and no rails. For groups that gain nothing from the fabric: they go
// where the fleet's fragmentation grows least.
func NodeTopology() PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) { r.Topology = "node" }
}

// WithQueue charges the group to a queue (with queues configured on the cluster: raygo
// start --head --queues); by default its namespace's queue.
func WithQueue(queue string) PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) { r.Queue = queue }
}

// WithPriority gives the group a priority class of the queue configuration
// ("training-high", ...); by default its queue's.
func WithPriority(class string) PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) { r.Priority = class }
}

// WithMaxRuntime removes the group once it has run (been CREATED) for d, rounded up to
// whole seconds (Kueue's maximumExecutionTimeSeconds; max_runtime_s in the table). At
// most a year; 0 means no limit.
func WithMaxRuntime(d time.Duration) PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) { r.MaxRuntimeS = int64((d + time.Second - 1) / time.Second) }
}

// WithBundleLabelSelector gives one label selector per bundle: label → "value",
// "in(a,b)", "!value" or "!in(a,b)". A bundle lands only on a node whose labels match.
func WithBundleLabelSelector(selectors []map[string]string) PlacementGroupOption {
	return func(r *pb.CreatePlacementGroupRequest) {
		for i, sel := range selectors {
			if i < len(r.Bundles) {
				r.Bundles[i].LabelSelector = sel
			}
		}
		for i := len(r.Bundles); i < len(selectors); i++ {
			// More selectors than bundles is bad input; let the server name it.
			r.Bundles = append(r.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{LabelSelector: selectors[i]})
		}
	}
}

// PlacementGroup is a handle on a group the GCS accepted.
type PlacementGroup struct {
	client   *Client
	ID       string
	Name     string
	Strategy Strategy
	Bundles  []Bundle

	// created is the group's row when the GCS answered the create with it CREATED:
	// Ready and Wait answer from it without a call until Remove.
	mu      sync.Mutex
	created *pb.PlacementGroupInfo
}

// BundleInfo is where one bundle lives.
type BundleInfo struct {
	Index     int
	Resources Bundle
	// NodeID and NodeAddress (the raylet's host:port) are empty while the bundle is not
	// placed.
	NodeID      string
	NodeAddress string
	// GPUIDs are the NVML indices of the bundle's GPUs on its node, DeviceUUIDs their
	// UUIDs (MIG device UUIDs for MIG slices), and CUDAVisibleDevices the exact value for
	// CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER=PCI_BUS_ID). Empty without GPUs.
	GPUIDs             []int
	DeviceUUIDs        []string
	CUDAVisibleDevices string
}

// PlacementGroupInfo is one row of the placement-group table.
type PlacementGroupInfo struct {
	ID           string
	Name         string
	Namespace    string
	Strategy     Strategy
	State        string // PENDING, PREPARED, CREATED, RESCHEDULING or REMOVED
	IsDetached   bool
	CreatorJobID string
	Bundles      []BundleInfo
	// SchedulingState is Ray's: QUEUED, SCHEDULING_STARTED, NO_RESOURCES, INFEASIBLE,
	// FAILED_TO_COMMIT_RESOURCES, FINISHED or REMOVED.
	SchedulingState           string
	SchedulingAttempt         int
	EndToEndCreationLatencyMs float64
	SchedulingLatencyMs       float64
	// PendingReason says why a pending group waits; PendingReasonCode is its code from
	// the one list of pending reasons (QuotaExceeded, NoResources, Infeasible, ...).
	PendingReason     string
	PendingReasonCode string
	// Queue, PriorityClass and Priority: with queues configured, where the group is charged.
	Queue         string
	PriorityClass string
	Priority      int64
	// Preemptions counts the times the group was told it is being preempted;
	// LastPreemption is the last notice (nil before the first).
	Preemptions    int
	LastPreemption *PreemptionNotice
}

func infoFromProto(p *pb.PlacementGroupInfo) *PlacementGroupInfo {
	info := &PlacementGroupInfo{
		ID: p.PlacementGroupId, Name: p.Name, Namespace: p.Namespace, Strategy: Strategy(p.Strategy.String()),
		State: p.State.String(), IsDetached: p.IsDetached, CreatorJobID: p.CreatorJobId, PendingReason: p.PendingReason,
		PendingReasonCode: p.PendingReasonCode, Queue: p.Queue, PriorityClass: p.PriorityClass, Priority: p.Priority,
		Preemptions: int(p.Preemptions), LastPreemption: noticeFromProto(p.LastPreemption),
	}
	if s := p.Stats; s != nil {
		info.SchedulingState = SchedulingStateName(s.SchedulingState)
		info.SchedulingAttempt = int(s.SchedulingAttempt)
		info.EndToEndCreationLatencyMs = s.EndToEndCreationLatencyMs
		info.SchedulingLatencyMs = s.SchedulingLatencyMs
	}
	for _, b := range p.Bundles {
		bundle := BundleInfo{Index: int(b.BundleIndex), Resources: Bundle(b.UnitResources), NodeID: b.NodeId, NodeAddress: b.NodeAddress,
			DeviceUUIDs: b.DeviceUuids, CUDAVisibleDevices: b.CudaVisibleDevices}
		for _, id := range b.GpuIds {
			bundle.GPUIDs = append(bundle.GPUIDs, int(id))
		}
		info.Bundles = append(info.Bundles, bundle)
	}
	return info
}

// SchedulingStateName spells a scheduling state as Ray's state API does.
func SchedulingStateName(s pb.SchedulingState) string { return stateapi.SchedulingStateName(s) }

// CreatePlacementGroup asks the GCS for a group. It returns once the GCS validated and
// persisted it (bad input fails here with ErrInvalidArgument naming the field); use
// Ready or Wait for the reservation.
func (c *Client) CreatePlacementGroup(ctx context.Context, bundles []Bundle, strategy Strategy, opts ...PlacementGroupOption) (*PlacementGroup, error) {
	// The GCS answers once the group is CREATED or its first attempt failed (in
	// milliseconds): a group that fits needs no second call to be ready.
	req := &pb.CreatePlacementGroupRequest{Strategy: string(strategy), Namespace: c.namespace, CreatorJobId: c.jobID,
		WaitFirstAttemptMs: waitFirstAttemptMs}
	for _, b := range bundles {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: b})
	}
	for _, opt := range opts {
		opt(req)
	}
	reply, err := c.pgs.CreatePlacementGroup(ctx, req)
	if err != nil {
		return nil, c.wrap("create placement group", err)
	}
	pg := c.handle(reply.PlacementGroup)
	if reply.PlacementGroup.GetState() == pb.PlacementGroupState_CREATED {
		pg.created = reply.PlacementGroup
	}
	return pg, nil
}

// waitFirstAttemptMs is how long CreatePlacementGroup lets the GCS wait for a new
// group's first attempt.
const waitFirstAttemptMs = 1000

func (c *Client) handle(p *pb.PlacementGroupInfo) *PlacementGroup {
	pg := &PlacementGroup{client: c, ID: p.PlacementGroupId, Name: p.Name, Strategy: Strategy(p.Strategy.String())}
	for _, b := range p.Bundles {
		pg.Bundles = append(pg.Bundles, Bundle(b.UnitResources))
	}
	return pg
}

// Ready blocks until the group is CREATED and returns where its bundles are. It fails
// with ErrRemoved if the group is removed, and with ctx's error when ctx ends first.
func (pg *PlacementGroup) Ready(ctx context.Context) (*PlacementGroupInfo, error) {
	pg.mu.Lock()
	created := pg.created
	pg.mu.Unlock()
	if created != nil {
		return infoFromProto(created), nil
	}
	reply, err := pg.client.pgs.WaitPlacementGroupUntilReady(ctx, &pb.WaitPlacementGroupUntilReadyRequest{PlacementGroupId: pg.ID})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			return nil, fmt.Errorf("placement group %s: %w", pg.ID, ErrRemoved)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("placement group %s not ready: %w", pg.ID, ctx.Err())
		}
		return nil, pg.client.wrap("wait for placement group "+pg.ID, err)
	}
	return infoFromProto(reply.PlacementGroup), nil
}

// Wait reports whether the group is CREATED within timeout (Ray's pg.wait).
func (pg *PlacementGroup) Wait(ctx context.Context, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := pg.Ready(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return false, nil
	}
	return err == nil, err
}

// Remove removes the group and releases its bundles; removing twice is harmless.
func (pg *PlacementGroup) Remove(ctx context.Context) error {
	pg.mu.Lock()
	pg.created = nil
	pg.mu.Unlock()
	if _, err := pg.client.pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: pg.ID}); err != nil {
		return pg.client.wrap("remove placement group "+pg.ID, err)
	}
	return nil
}

// Table returns the group's row of the placement-group table.
func (pg *PlacementGroup) Table(ctx context.Context) (*PlacementGroupInfo, error) {
	reply, err := pg.client.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: pg.ID})
	if err != nil {
		return nil, pg.client.wrap("get placement group "+pg.ID, err)
	}
	if reply.PlacementGroup == nil {
		return nil, fmt.Errorf("placement group %s: %w", pg.ID, ErrNotFound)
	}
	return infoFromProto(reply.PlacementGroup), nil
}

// GetPlacementGroup finds a live group by name in the client's namespace.
func (c *Client) GetPlacementGroup(ctx context.Context, name string) (*PlacementGroup, error) {
	reply, err := c.pgs.GetNamedPlacementGroup(ctx, &pb.GetNamedPlacementGroupRequest{Name: name, Namespace: c.namespace})
	if err != nil {
		return nil, c.wrap("get placement group "+name, err)
	}
	if reply.PlacementGroup == nil {
		return nil, fmt.Errorf("placement group named %q in namespace %q: %w", name, c.namespace, ErrNotFound)
	}
	return c.handle(reply.PlacementGroup), nil
}

// PlacementGroupTable returns every group the GCS knows, REMOVED ones included.
func (c *Client) PlacementGroupTable(ctx context.Context) ([]*PlacementGroupInfo, error) {
	reply, err := c.pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		return nil, c.wrap("list placement groups", err)
	}
	out := make([]*PlacementGroupInfo, len(reply.PlacementGroups))
	for i, p := range reply.PlacementGroups {
		out[i] = infoFromProto(p)
	}
	return out, nil
}
