package sdk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Tasks run as Ray's do: the driver leases a worker from a raylet for a resource shape
// (its "scheduling key"), pushes tasks to it one at a time while tasks of that shape
// wait, and returns the worker when none is left. The raylet holds the lease's
// resources — from the node, or from a placement-group bundle — for that time.

const (
	// maxLeaseRequestsPerKey bounds the lease requests in flight for one scheduling key.
	maxLeaseRequestsPerKey = 8
	// leaseTimeout bounds one lease request: a first worker on a node may have to fetch
	// the executable from the GCS and start.
	leaseTimeout = 2 * time.Minute
)

// Submit runs a registered task function on the cluster and returns a ref to its
// result (Ray's f.remote). The function and the arguments are checked here (a name or
// type mismatch fails now, naming the argument), and so is a placement-group request
// that fits no bundle. The task itself fails through Get: with the function's error
// (*TaskError, not retried), or with ErrTaskFailed once its worker died more often than
// WithMaxRetries allows. ctx bounds the task: when it ends, the task is abandoned.
//
//	ref, err := client.Submit(ctx, "square", sdk.Args(3), sdk.WithCPUs(1))
//	var out int
//	err = sdk.Get(ctx, ref, &out)
func (c *Client) Submit(ctx context.Context, function string, args []any, opts ...Option) (*ObjectRef, error) {
	o := newCallOptions(opts)
	if len(o.actorOnly) > 0 {
		return nil, fmt.Errorf("%w: task %q: %s applies to actors only", ErrInvalidArgument, function, strings.Join(o.actorOnly, ", "))
	}
	if o.maxRetries < -1 {
		return nil, fmt.Errorf("%w: task %q: WithMaxRetries(%d): must be >= -1", ErrInvalidArgument, function, o.maxRetries)
	}
	f, err := lookupTask(function)
	if err != nil {
		return nil, err
	}
	encoded, err := f.encodeArgs(fmt.Sprintf("task %q", function), args)
	if err != nil {
		return nil, err
	}
	if err := c.requireExecutable(fmt.Sprintf("task %q", function)); err != nil {
		return nil, err
	}
	resources, err := o.resourcesFor(DefaultTaskCPUs)
	if err != nil {
		return nil, fmt.Errorf("task %q: %w", function, err)
	}
	strategy := o.schedulingStrategy(0)
	if strategy.Kind == pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_PLACEMENT_GROUP {
		if err := c.checkFitsPlacementGroup(ctx, strategy, resources); err != nil {
			return nil, fmt.Errorf("task %q: %w", function, err)
		}
	}
	t := &pendingTask{
		ctx: ctx, ref: newObjectRef(newTaskID()), function: function, args: encoded, refArgs: refArgs(args), maxRetries: o.maxRetries,
	}
	c.tasks.submit(t, resources, strategy)
	return t.ref, nil
}

// Args is sugar for the argument list of Submit and CreateActor.
func Args(args ...any) []any { return args }

func refArgs(args []any) map[int]*ObjectRef {
	var refs map[int]*ObjectRef
	for i, arg := range args {
		if ref, ok := arg.(*ObjectRef); ok {
			if refs == nil {
				refs = map[int]*ObjectRef{}
			}
			refs[i] = ref
		}
	}
	return refs
}

// resolveArgs waits for the refs among a call's arguments and puts their values in.
func resolveArgs(ctx context.Context, args [][]byte, refs map[int]*ObjectRef) ([][]byte, error) {
	if len(refs) == 0 {
		return args, nil
	}
	out := append([][]byte(nil), args...)
	for i, ref := range refs {
		if err := ref.wait(ctx); err != nil {
			return nil, err
		}
		if ref.err != nil {
			return nil, fmt.Errorf("args[%d] is object %s, which failed: %w", i, ref.id, ref.err)
		}
		out[i] = ref.value
	}
	return out, nil
}

// taskIDBytes is the size of a task id (its ObjectRef's id).
const taskIDBytes = 16

func newTaskID() string { return ids.Random(taskIDBytes) }

// checkFitsPlacementGroup rejects a request that fits no bundle it could use, naming
// the bundle, before anything waits for room that will never come.
func (c *Client) checkFitsPlacementGroup(ctx context.Context, strategy *pb.SchedulingStrategy, wanted map[string]float64) error {
	bundles, err := c.groupBundles(ctx, strategy.PlacementGroupId)
	if err != nil {
		return err
	}
	request, err := resources.ParseTaskResources(wanted)
	if err != nil {
		return err
	}
	if err := resources.CheckFitsBundle(strategy.PlacementGroupId, bundles, int(strategy.BundleIndex), request); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return nil
}

// groupBundles returns a placement group's bundle shapes. They never change, so the
// client reads them from the GCS once per group, not once per task; a group removed
// later fails its tasks when they ask for a worker (ErrRemoved).
func (c *Client) groupBundles(ctx context.Context, placementGroupID string) ([]resources.Set, error) {
	if cached, ok := c.bundleShapes.Load(placementGroupID); ok {
		return cached.([]resources.Set), nil
	}
	reply, err := c.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: placementGroupID})
	if err != nil {
		return nil, c.wrap("placement group "+placementGroupID, err)
	}
	if reply.PlacementGroup == nil || reply.PlacementGroup.State == pb.PlacementGroupState_REMOVED {
		return nil, fmt.Errorf("placement group %s: %w", placementGroupID, ErrRemoved)
	}
	bundles := make([]resources.Set, len(reply.PlacementGroup.Bundles))
	for i, b := range reply.PlacementGroup.Bundles {
		if bundles[i], err = resources.SetFromFloat(b.UnitResources); err != nil {
			return nil, err
		}
	}
	c.bundleShapes.Store(placementGroupID, bundles)
	return bundles, nil
}

type pendingTask struct {
	ctx        context.Context
	ref        *ObjectRef
	function   string
	args       [][]byte
	refArgs    map[int]*ObjectRef
	attempt    int
	maxRetries int
}

// schedulingQueue holds the tasks of one scheduling key (resources and strategy).
type schedulingQueue struct {
	key        string
	resources  map[string]float64
	strategy   *pb.SchedulingStrategy
	pending    []*pendingTask
	leases     int // workers leased and running this queue's tasks
	requesting int // lease requests in flight
}

type taskSubmitter struct {
	c      *Client
	ctx    context.Context // ends with the client
	cancel context.CancelFunc

	mu     sync.Mutex
	queues map[string]*schedulingQueue

	// chargePrefix and charges name the quota charge of each lease (with queues on the
	// GCS charges a lease outside groups to its job's queue): unique in the job, whose
	// driver and workers each submit tasks.
	chargePrefix string
	charges      atomic.Uint64
}

func newTaskSubmitter(c *Client) *taskSubmitter {
	ctx, cancel := context.WithCancel(context.Background())
	return &taskSubmitter{c: c, ctx: ctx, cancel: cancel, queues: map[string]*schedulingQueue{}, chargePrefix: ids.Random(8)}
}

// close stops the lease loops and fails the tasks still waiting for a worker.
func (s *taskSubmitter) close() {
	s.cancel()
	s.mu.Lock()
	var waiting []*pendingTask
	for _, q := range s.queues {
		waiting = append(waiting, q.pending...)
		q.pending = nil
	}
	s.mu.Unlock()
	for _, t := range waiting {
		t.ref.complete(nil, fmt.Errorf("task %s: %w", t.function, ErrClosed), Placement{})
	}
}

func schedulingKey(resources map[string]float64, strategy *pb.SchedulingStrategy) string {
	names := make([]string, 0, len(resources))
	for name := range resources {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s=%g;", name, resources[name])
	}
	fmt.Fprintf(&b, "|%s|%s|%d|%s|%t", strategy.Kind, strategy.PlacementGroupId, strategy.BundleIndex, strategy.NodeId, strategy.Soft)
	for _, selector := range []map[string]string{strategy.LabelSelector, strategy.SoftLabelSelector} {
		b.WriteByte('|')
		for _, key := range slices.Sorted(maps.Keys(selector)) {
			fmt.Fprintf(&b, "%s=%s;", key, selector[key])
		}
	}
	return b.String()
}

// submit queues a task once the refs among its arguments are ready.
func (s *taskSubmitter) submit(t *pendingTask, resources map[string]float64, strategy *pb.SchedulingStrategy) {
	key := schedulingKey(resources, strategy)
	enqueue := func() {
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			t.ref.complete(nil, fmt.Errorf("task %s: %w", t.function, ErrClosed), Placement{})
			return
		}
		q, ok := s.queues[key]
		if !ok {
			q = &schedulingQueue{key: key, resources: resources, strategy: strategy}
			s.queues[key] = q
		}
		q.pending = append(q.pending, t)
		s.requestLeasesLocked(q)
		s.mu.Unlock()
	}
	if len(t.refArgs) == 0 {
		enqueue()
		return
	}
	go func() {
		args, err := resolveArgs(t.ctx, t.args, t.refArgs)
		if err != nil {
			t.ref.complete(nil, fmt.Errorf("task %s: %w", t.function, err), Placement{})
			return
		}
		t.args, t.refArgs = args, nil
		enqueue()
	}()
}

// requestLeasesLocked asks for more workers while tasks wait for one.
func (s *taskSubmitter) requestLeasesLocked(q *schedulingQueue) {
	for q.requesting < len(q.pending) && q.requesting < maxLeaseRequestsPerKey {
		q.requesting++
		go s.lease(q)
	}
}

// popLocked takes the next task that is still wanted; tasks whose ctx ended fail.
func (q *schedulingQueue) popLocked() *pendingTask {
	q.dropAbandonedLocked()
	if len(q.pending) == 0 {
		return nil
	}
	t := q.pending[0]
	q.pending = q.pending[1:]
	return t
}

// dropAbandonedLocked fails the waiting tasks whose ctx ended, so refs that wait on
// them do not wait for a worker that may never come.
func (q *schedulingQueue) dropAbandonedLocked() {
	kept := q.pending[:0]
	for _, t := range q.pending {
		if err := t.ctx.Err(); err != nil {
			t.ref.complete(nil, fmt.Errorf("task %s abandoned: %w", t.function, err), Placement{})
			continue
		}
		kept = append(kept, t)
	}
	clear(q.pending[len(kept):])
	q.pending = kept
}

// lease gets one worker for q and runs q's tasks on it. The quota charge the GCS takes
// for the lease (queues on) is held across its attempts and returned when it ends.
func (s *taskSubmitter) lease(q *schedulingQueue) {
	backoff := rpcutil.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	charge := &leaseCharge{id: s.chargePrefix + "-" + strconv.FormatUint(s.charges.Add(1), 10)}
	defer s.returnCharge(charge)
	for {
		s.mu.Lock()
		q.dropAbandonedLocked()
		if len(q.pending) == 0 || s.ctx.Err() != nil {
			q.requesting--
			s.mu.Unlock()
			return
		}
		waitForRoom := q.leases == 0
		s.mu.Unlock()

		worker, raylet, err := s.requestWorker(q, waitForRoom, charge)
		switch {
		case err == nil:
			s.mu.Lock()
			q.requesting--
			q.leases++
			s.mu.Unlock()
			s.runLease(q, worker, raylet)
			return
		case status.Code(err) == codes.InvalidArgument || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrRemoved) || errors.Is(err, ErrUnschedulable):
			// It will never fit: fail what waits, as the GCS would reject it.
			s.mu.Lock()
			q.requesting--
			failed := q.pending
			q.pending = nil
			s.mu.Unlock()
			if _, isStatus := status.FromError(err); isStatus {
				err = s.c.wrap("worker lease", err) // a raylet's refusal: ErrInvalidArgument
			}
			for _, t := range failed {
				t.ref.complete(nil, fmt.Errorf("task %s: %w", t.function, err), Placement{})
			}
			return
		case status.Code(err) == codes.ResourceExhausted && !waitForRoom:
			// The workers already leased for this key will run what waits — unless
			// they all ended meanwhile; then ask again, waiting for room.
			s.mu.Lock()
			if q.leases > 0 {
				q.requesting--
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			continue
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(backoff.Next()):
		}
	}
}

// candidateRaylets asks the GCS where q may lease a worker (ActorInfoService.
// ChooseLeaseTargets: the node choice the GCS makes for actors) and returns the raylet
// addresses, best first. A group not placed yet is waited for here.
func (s *taskSubmitter) candidateRaylets(q *schedulingQueue, charge *leaseCharge) ([]string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, leaseTimeout)
	defer cancel()
	s.mu.Lock()
	backlog := int32(len(q.pending))
	s.mu.Unlock()
	req := &pb.ChooseLeaseTargetsRequest{RequestId: q.key, Resources: q.resources, SchedulingStrategy: q.strategy, Backlog: backlog,
		JobId: s.c.jobID, ChargeId: charge.id}
	for {
		reply, err := s.c.actors.ChooseLeaseTargets(ctx, req)
		if err != nil {
			return nil, s.c.wrap("choose lease targets", err)
		}
		charge.held = charge.held || reply.Charged
		if reply.PendingReasonCode != "" { // its queue's quota holds it back
			return nil, status.Errorf(codes.Unavailable, "%s", reply.Reason)
		}
		switch reply.Outcome {
		case pb.LeaseOutcome_LEASE_OUTCOME_PLACED, pb.LeaseOutcome_LEASE_OUTCOME_NOT_NOW:
			if reply.ReasonCode == reasonGroupNotReady {
				if err := s.waitGroupReady(ctx, q.strategy.PlacementGroupId); err != nil {
					return nil, err
				}
				continue
			}
			out := make([]string, 0, len(reply.Targets))
			for _, t := range reply.Targets {
				out = append(out, t.RayletAddress)
			}
			return out, nil
		case pb.LeaseOutcome_LEASE_OUTCOME_UNSCHEDULABLE:
			if reply.ReasonCode == reasonGroupRemoved {
				return nil, fmt.Errorf("placement group %s: %w", q.strategy.PlacementGroupId, ErrRemoved)
			}
			return nil, fmt.Errorf("%w: %s", ErrUnschedulable, reply.Reason)
		default: // infeasible: wait for a node that can hold it
			return nil, status.Errorf(codes.Unavailable, "%s", reply.Reason)
		}
	}
}

// The GCS's reason codes (placement.ReasonCode) the submitter acts on.
const (
	reasonGroupNotReady = "group_not_ready"
	reasonGroupRemoved  = "group_removed"
)

// leaseCharge is one lease's quota charge at the GCS: its id, and whether the GCS holds
// it. Owned by the lease goroutine.
type leaseCharge struct {
	id   string
	held bool
}

// returnCharge gives a lease's charge back to its queue (best effort: the job's end
// returns whatever is left).
func (s *taskSubmitter) returnCharge(charge *leaseCharge) {
	if !charge.held {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.c.actors.ReturnLeaseCharge(ctx, &pb.ReturnLeaseChargeRequest{JobId: s.c.jobID, ChargeId: charge.id}); err == nil {
		charge.held = false
	}
}

// waitGroupReady blocks until a placement group is placed (ErrRemoved if it is removed).
func (s *taskSubmitter) waitGroupReady(ctx context.Context, placementGroupID string) error {
	_, err := s.c.pgs.WaitPlacementGroupUntilReady(ctx, &pb.WaitPlacementGroupUntilReadyRequest{PlacementGroupId: placementGroupID})
	if status.Code(err) == codes.FailedPrecondition {
		return fmt.Errorf("placement group %s: %w", placementGroupID, ErrRemoved)
	}
	return err
}

// requestWorker asks the candidate raylets for a worker in turn. With waitForRoom the
// last one asked queues the request until room frees up (bounded by leaseTimeout).
func (s *taskSubmitter) requestWorker(q *schedulingQueue, waitForRoom bool, charge *leaseCharge) (*pb.WorkerInfo, pb.NodeManagerServiceClient, error) {
	raylets, err := s.candidateRaylets(q, charge)
	if err != nil {
		return nil, nil, err
	}
	if len(raylets) == 0 {
		return nil, nil, status.Errorf(codes.Unavailable, "no node to lease %v from yet", q.resources)
	}
	req := &pb.RequestWorkerLeaseRequest{
		JobId: s.c.jobID, ExecutableSha256: s.c.executable, Resources: q.resources,
		PlacementGroupId: q.strategy.PlacementGroupId, BundleIndex: q.strategy.BundleIndex,
	}
	if q.strategy.Kind != pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_PLACEMENT_GROUP {
		req.BundleIndex = -1
	}
	var lastErr error
	for i, address := range raylets {
		conn, err := s.c.connTo(address)
		if err != nil {
			lastErr = err
			continue
		}
		raylet := pb.NewNodeManagerServiceClient(conn)
		req.Queue = waitForRoom && i == len(raylets)-1
		ctx, cancel := context.WithTimeout(s.ctx, leaseTimeout)
		reply, err := raylet.RequestWorkerLease(ctx, req)
		cancel()
		if err == nil {
			return reply.Worker, raylet, nil
		}
		lastErr = err
		if status.Code(err) == codes.InvalidArgument {
			return nil, nil, err
		}
	}
	return nil, nil, lastErr
}

// runLease pushes q's tasks to one leased worker until none waits, then returns it.
func (s *taskSubmitter) runLease(q *schedulingQueue, worker *pb.WorkerInfo, raylet pb.NodeManagerServiceClient) {
	disconnect := false
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = raylet.ReturnWorker(ctx, &pb.ReturnWorkerRequest{WorkerId: worker.WorkerId, Disconnect: disconnect})
		cancel()
		if disconnect {
			s.c.forgetConn(worker.Address)
		}
		s.mu.Lock()
		q.leases--
		// Tasks queued meanwhile (or put back after a failure) need a worker.
		s.requestLeasesLocked(q)
		s.mu.Unlock()
	}()
	conn, err := s.c.connTo(worker.Address)
	if err != nil {
		disconnect = true
		return
	}
	client := pb.NewCoreWorkerServiceClient(conn)
	where := Placement{NodeID: worker.NodeId, WorkerID: worker.WorkerId, PID: int(worker.Pid)}
	for {
		s.mu.Lock()
		t := q.popLocked()
		s.mu.Unlock()
		if t == nil {
			return
		}
		reply, err := client.PushTask(t.ctx, &pb.PushTaskRequest{TaskId: t.ref.id, FunctionName: t.function, Args: t.args, Attempt: int32(t.attempt)})
		if err == nil {
			t.ref.complete(firstReturn(reply), taskError(t.function, reply.Error), where)
			continue
		}
		// The worker is gone or in an unknown state: never reuse it.
		disconnect = true
		if t.ctx.Err() != nil {
			t.ref.complete(nil, fmt.Errorf("task %s abandoned: %w", t.function, t.ctx.Err()), where)
			return
		}
		if code := status.Code(err); code != codes.Unavailable && code != codes.Canceled {
			// Not a dead worker (e.g. a result over the message size limit): running
			// the task again would fail the same way.
			t.ref.complete(nil, fmt.Errorf("task %s on worker %s: %w", t.function, worker.WorkerId, err), where)
			return
		}
		t.attempt++
		if t.maxRetries >= 0 && t.attempt > t.maxRetries {
			t.ref.complete(nil, fmt.Errorf("task %s: %w: its worker %s (pid %d on node %s) died %d times (max_retries=%d): %v",
				t.function, ErrTaskFailed, worker.WorkerId, worker.Pid, worker.NodeId, t.attempt, t.maxRetries, status.Convert(err).Message()), where)
			return
		}
		s.mu.Lock()
		q.pending = append([]*pendingTask{t}, q.pending...)
		s.mu.Unlock()
		return
	}
}

func firstReturn(reply *pb.PushTaskReply) []byte {
	if len(reply.Returns) == 0 {
		return nil
	}
	return reply.Returns[0]
}

func taskError(function string, e *pb.TaskError) error {
	if e == nil {
		return nil
	}
	return &TaskError{Function: function, Type: e.Type, Message: e.Message}
}
