package gcs

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/auth"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Who may call what, and tenant isolation: the one place the GCS applies a token's
// scope (internal/auth). The token check (rpcutil) puts the scope in the call's
// context; tenancy's interceptors then
//   - refuse a method the scope may not call (PermissionDenied): AuthService, queue
//     changes and the KV are admin's; node registration, the autoscaler's service,
//     executable downloads and the raylets' reports are admin's or a node's; a tenant
//     (queue:<q> or namespace:<ns>) calls only the methods in tenantMethods;
//   - for a tenant, check that what a request creates lies in its queue or namespace
//     (PermissionDenied naming the field), that the group, actor or job a request names
//     is its own (PermissionDenied), and hide the others from what it reads: lists carry
//     only its own rows, and a get of another's is answered as for an unknown id.
//
// A group is a tenant's when its queue is the tenant's queue (queue scope) or its
// namespace is the tenant's namespace (namespace scope); an actor or a job, which has no
// queue, when its namespace is the tenant's or maps to the tenant's queue (--queues).
//
// It reads the tables through these functions only (the managers' own handlers and
// lookups, which lock them): it runs outside every handler, so no lock is held.
type tenancy struct {
	// queueOf maps a namespace to its queue ("" without queues).
	queueOf func(namespace string) string
	// group is a group's row (nil for an unknown id); actor an actor's (NotFound for an
	// unknown id); job a job's (nil for an unknown id).
	group func(ctx context.Context, id string) (*pb.PlacementGroupInfo, error)
	actor func(ctx context.Context, id string) (*pb.ActorInfo, error)
	job   func(id string) *pb.JobInfo
}

// newTenancy reads the tables through the managers' handlers.
func newTenancy(groups *pgManager, actors *actorManager, jobs *jobManager) *tenancy {
	return &tenancy{
		queueOf: groups.queueForNamespace,
		group: func(ctx context.Context, id string) (*pb.PlacementGroupInfo, error) {
			reply, err := groups.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
			return reply.GetPlacementGroup(), err
		},
		actor: func(ctx context.Context, id string) (*pb.ActorInfo, error) {
			reply, err := actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: id})
			return reply.GetActor(), err
		},
		job: jobs.get,
	}
}

// access is who may call a method.
type access int

const (
	adminOnly   access = iota // the default for any method not listed
	nodeOrAdmin               // a raylet's or the autoscaler's credential
	reader                    // any token; a tenant sees only its own (tenancy.filter)
	tenantWork                // admin and tenants, within their own (tenancy.check); not node
)

// methodAccess lists every method a non-admin token may call.
var methodAccess = map[string]access{
	"/raygo.v1.NodeInfoService/GetClusterInfo":  reader,
	"/raygo.v1.NodeInfoService/GetAllNodeInfo":  reader,
	"/raygo.v1.NodeInfoService/RegisterNode":    nodeOrAdmin,
	"/raygo.v1.NodeInfoService/ReportHeartbeat": nodeOrAdmin,
	"/raygo.v1.NodeInfoService/DrainNode":       nodeOrAdmin,
	"/raygo.v1.NodeInfoService/UnregisterNode":  nodeOrAdmin,

	"/raygo.v1.JobInfoService/AddJob":          tenantWork,
	"/raygo.v1.JobInfoService/RenewJobLease":   tenantWork,
	"/raygo.v1.JobInfoService/MarkJobFinished": tenantWork,
	"/raygo.v1.JobInfoService/GetAllJobInfo":   reader,

	"/raygo.v1.PlacementGroupService/CreatePlacementGroup":         tenantWork,
	"/raygo.v1.PlacementGroupService/RemovePlacementGroup":         tenantWork,
	"/raygo.v1.PlacementGroupService/GetPlacementGroup":            reader,
	"/raygo.v1.PlacementGroupService/GetNamedPlacementGroup":       reader,
	"/raygo.v1.PlacementGroupService/GetAllPlacementGroup":         reader,
	"/raygo.v1.PlacementGroupService/WaitPlacementGroupUntilReady": reader,
	"/raygo.v1.PlacementGroupService/WaitPreemptionNotice":         tenantWork,
	"/raygo.v1.PlacementGroupService/AckPreemptionNotice":          tenantWork,
	"/raygo.v1.QueueService/ListQueues":                            reader,

	"/raygo.v1.ActorInfoService/CreateActor":         tenantWork,
	"/raygo.v1.ActorInfoService/GetActorInfo":        reader,
	"/raygo.v1.ActorInfoService/GetNamedActorInfo":   reader,
	"/raygo.v1.ActorInfoService/GetAllActorInfo":     reader,
	"/raygo.v1.ActorInfoService/KillActor":           tenantWork,
	"/raygo.v1.ActorInfoService/ChooseLeaseTargets":  tenantWork,
	"/raygo.v1.ActorInfoService/ReturnLeaseCharge":   tenantWork,
	"/raygo.v1.ActorInfoService/ReportWorkerFailure": nodeOrAdmin,

	"/raygo.v1.ExecutableService/HasExecutable":      reader,
	"/raygo.v1.ExecutableService/UploadExecutable":   tenantWork,
	"/raygo.v1.ExecutableService/DownloadExecutable": nodeOrAdmin,

	"/raygo.v1.AuthService/AuthorizeLease": nodeOrAdmin,

	// A tenant's Python driver stores its functions, its worker reads them: only under
	// its own jobs' keys (checkFunctionKey).
	"/raygo.v1.InternalKVService/KVPut": tenantWork,
	"/raygo.v1.InternalKVService/KVGet": tenantWork,

	"/raygo.v1.AutoscalerStateService/GetClusterResourceState":          nodeOrAdmin,
	"/raygo.v1.AutoscalerStateService/ReportAutoscalingState":           nodeOrAdmin,
	"/raygo.v1.AutoscalerStateService/RequestClusterResourceConstraint": nodeOrAdmin,
	"/raygo.v1.AutoscalerStateService/GetClusterStatus":                 nodeOrAdmin,
	"/raygo.v1.AutoscalerStateService/DrainNode":                        nodeOrAdmin,
}

// allowed refuses a method the scope may not call.
func allowed(scope auth.Scope, method string) error {
	need := methodAccess[method]
	switch {
	case scope.Kind == auth.ScopeAdmin,
		need == reader,
		need == nodeOrAdmin && scope.Kind == auth.ScopeNode,
		need == tenantWork && scope.IsTenant():
		return nil
	}
	who := "an admin token"
	switch need {
	case nodeOrAdmin:
		who = "an admin or node token"
	case tenantWork:
		who = "an admin or tenant (queue:<q>, namespace:<ns>) token"
	}
	return errorf(errPermissionDenied, "%s needs %s; the call's token has scope %s", method, who, scope)
}

// owns reports whether a tenant owns an object of the given namespace and queue ("":
// the one its namespace maps to). A node token owns nothing: it reads no group's, actor's
// or job's details (the autoscaler's service gives it the demand).
func (t *tenancy) owns(scope auth.Scope, namespace, queue string) bool {
	switch scope.Kind {
	case auth.ScopeNode:
		return false
	case auth.ScopeNamespace:
		return namespace == scope.Name
	case auth.ScopeQueue:
		if queue == "" {
			queue = t.queueOf(namespace)
		}
		return queue == scope.Name
	default:
		return true
	}
}

func (t *tenancy) ownsGroup(scope auth.Scope, g *pb.PlacementGroupInfo) bool {
	return g != nil && t.owns(scope, g.Namespace, g.Queue)
}

func (t *tenancy) ownsActor(scope auth.Scope, a *pb.ActorInfo) bool {
	return a != nil && t.owns(scope, a.Namespace, "")
}

func (t *tenancy) ownsJob(scope auth.Scope, j *pb.JobInfo) bool {
	return j != nil && t.owns(scope, j.Namespace, "")
}

// notYours is the refusal of a request naming another tenant's object.
func notYours(scope auth.Scope, field, id string) error {
	return errorf(errPermissionDenied, "%s %s: not in this token's %s", field, id, scope)
}

// outside is the refusal of a request that would create work outside the tenant.
func outside(scope auth.Scope, field, value string) error {
	return errorf(errPermissionDenied, "%s %q: this token (scope %s) may only create work in its own %s", field, value, scope, scope.Kind)
}

// check applies a tenant's checks to a request before its handler runs; it may fill
// a namespace or queue the request left empty with the tenant's own.
func (t *tenancy) check(ctx context.Context, scope auth.Scope, req any) error {
	switch req := req.(type) {
	case *pb.CreatePlacementGroupRequest:
		for i, id := range req.RemovePlacementGroupIds { // removals riding on the create
			if err := t.checkGroupID(ctx, scope, fmt.Sprintf("remove_placement_group_ids[%d]", i), id); err != nil {
				return err
			}
		}
		return t.checkNewGroup(scope, req)
	case *pb.CreateActorRequest:
		if req.JobId != "" && !t.ownsJob(scope, t.job(req.JobId)) {
			return notYours(scope, "job_id", req.JobId)
		}
		if req.Namespace == "" {
			if job := t.job(req.JobId); job != nil {
				req.Namespace = job.Namespace
			}
		}
		if req.Namespace == "" && scope.Kind == auth.ScopeNamespace {
			req.Namespace = scope.Name
		}
		if !t.owns(scope, req.Namespace, "") {
			return outside(scope, "namespace", req.Namespace)
		}
		if id := req.GetSchedulingStrategy().GetPlacementGroupId(); id != "" {
			return t.checkGroupID(ctx, scope, "scheduling_strategy.placement_group_id", id)
		}
		return nil
	case *pb.ChooseLeaseTargetsRequest:
		// A lease may use only the tenant's own groups' bundles; nodes are shared, so node
		// affinity and labels reach only what no group holds.
		if id := req.JobId; id != "" && !t.ownsJob(scope, t.job(id)) {
			return notYours(scope, "job_id", id)
		}
		if id := req.GetSchedulingStrategy().GetPlacementGroupId(); id != "" {
			return t.checkGroupID(ctx, scope, "scheduling_strategy.placement_group_id", id)
		}
		return nil
	case *pb.AddJobRequest:
		if req.Namespace == "" && scope.Kind == auth.ScopeNamespace {
			req.Namespace = scope.Name
		}
		if !t.owns(scope, req.Namespace, "") {
			return outside(scope, "namespace", req.Namespace)
		}
		return nil
	case interface{ GetPlacementGroupId() string }:
		if _, isGet := req.(*pb.GetPlacementGroupRequest); isGet {
			return nil // hidden by filter
		}
		return t.checkGroupID(ctx, scope, "placement_group_id", req.GetPlacementGroupId())
	case *pb.KillActorRequest:
		actor, err := t.actor(ctx, req.ActorId)
		if err != nil {
			return err
		}
		if !t.ownsActor(scope, actor) {
			return notYours(scope, "actor_id", req.ActorId)
		}
		return nil
	case *pb.GetActorInfoRequest:
		actor, err := t.actor(ctx, req.ActorId)
		if err != nil {
			return err
		}
		if !t.ownsActor(scope, actor) {
			return errorf(errNotFound, "actor_id %s: no such actor", req.ActorId) // as unknown
		}
		return nil
	case *pb.KVPutRequest:
		return t.checkFunctionKey(scope, req.Namespace, string(req.Key))
	case *pb.KVGetRequest:
		return t.checkFunctionKey(scope, req.Namespace, string(req.Key))
	case interface{ GetJobId() string }: // RenewJobLease, MarkJobFinished, ReturnLeaseCharge
		if id := req.GetJobId(); id != "" && !t.ownsJob(scope, t.job(id)) {
			return notYours(scope, "job_id", id)
		}
		return nil
	}
	return nil
}

func (t *tenancy) checkNewGroup(scope auth.Scope, req *pb.CreatePlacementGroupRequest) error {
	switch scope.Kind {
	case auth.ScopeNamespace:
		if req.Namespace == "" {
			req.Namespace = scope.Name
		}
		if req.Namespace != scope.Name {
			return outside(scope, "namespace", req.Namespace)
		}
	case auth.ScopeQueue:
		if req.Queue != "" && req.Queue != scope.Name {
			return outside(scope, "queue", req.Queue)
		}
		if req.Queue == "" {
			// The queue the namespace maps to must be the tenant's; without queues
			// (none maps) the group is recorded as the tenant's queue.
			switch mapped := t.queueOf(req.Namespace); mapped {
			case "", scope.Name:
				req.Queue = scope.Name
			default:
				return outside(scope, "namespace", req.Namespace)
			}
		}
	}
	return nil
}

// checkGroupID refuses a group id, in the request's field, that is another tenant's.
func (t *tenancy) checkGroupID(ctx context.Context, scope auth.Scope, field, id string) error {
	group, err := t.group(ctx, id)
	if err != nil {
		return err
	}
	if group == nil {
		return nil // unknown: the handler answers as for anyone
	}
	if !t.ownsGroup(scope, group) {
		return notYours(scope, field, id)
	}
	return nil
}

// checkFunctionKey lets a tenant reach, in the KV, only its own jobs' Python functions:
// namespace "fun", key "RemoteFunction:<job id>:<sha256>" of a job it owns.
func (t *tenancy) checkFunctionKey(scope auth.Scope, namespace, key string) error {
	if namespace != functionKVNamespace {
		return errorf(errPermissionDenied, "namespace %q: a tenant token (scope %s) reaches only the %q namespace of the KV, its jobs' functions", namespace, scope, functionKVNamespace)
	}
	job, _, found := strings.Cut(strings.TrimPrefix(key, functionKeyPrefix), ":")
	if !strings.HasPrefix(key, functionKeyPrefix) || !found || !t.ownsJob(scope, t.job(job)) {
		return notYours(scope, "key", key)
	}
	return nil
}

// authorizeLease checks that a token of scope owns the job and the group (each when
// set) a worker lease on a raylet names: the raylets ask (AuthService.AuthorizeLease).
func (t *tenancy) authorizeLease(ctx context.Context, scope auth.Scope, jobID, groupID string) error {
	if jobID != "" && !t.ownsJob(scope, t.job(jobID)) {
		return notYours(scope, "job_id", jobID)
	}
	if groupID != "" {
		return t.checkGroupID(ctx, scope, "placement_group_id", groupID)
	}
	return nil
}

// filter hides from a tenant's reply what is not its own.
func (t *tenancy) filter(scope auth.Scope, reply any) {
	switch reply := reply.(type) {
	case *pb.GetPlacementGroupReply:
		if !t.ownsGroup(scope, reply.PlacementGroup) {
			reply.PlacementGroup = nil
		}
	case *pb.GetNamedPlacementGroupReply:
		if !t.ownsGroup(scope, reply.PlacementGroup) {
			reply.PlacementGroup = nil
		}
	case *pb.WaitPlacementGroupUntilReadyReply:
		if !t.ownsGroup(scope, reply.PlacementGroup) {
			reply.PlacementGroup = nil
		}
	case *pb.GetAllPlacementGroupReply:
		// The handler sends the rows in wire form (unknown fields): read them back.
		if wire := reply.ProtoReflect().GetUnknown(); len(wire) > 0 {
			decoded := &pb.GetAllPlacementGroupReply{}
			if err := proto.Unmarshal(wire, decoded); err == nil {
				reply.ProtoReflect().SetUnknown(nil)
				reply.PlacementGroups = append(reply.PlacementGroups, decoded.PlacementGroups...)
			} else {
				reply.ProtoReflect().SetUnknown(nil) // hide what cannot be checked
			}
		}
		reply.PlacementGroups = keep(reply.PlacementGroups, func(g *pb.PlacementGroupInfo) bool { return t.ownsGroup(scope, g) })
	case *pb.GetAllActorInfoReply:
		reply.Actors = keep(reply.Actors, func(a *pb.ActorInfo) bool { return t.ownsActor(scope, a) })
	case *pb.GetAllJobInfoReply:
		reply.Jobs = keep(reply.Jobs, func(j *pb.JobInfo) bool { return t.ownsJob(scope, j) })
	}
}

// keep returns the rows own accepts, in place.
func keep[T any](rows []T, own func(T) bool) []T {
	kept := rows[:0]
	for _, row := range rows {
		if own(row) {
			kept = append(kept, row)
		}
	}
	return kept
}

// hide applies filter to a reply read for ctx when its scope is a tenant's (the
// dashboard, which calls the handlers in process, past the interceptors).
func (t *tenancy) hide(ctx context.Context, reply any) {
	if scope := auth.ScopeFrom(ctx); confined(scope) {
		t.filter(scope, reply)
	}
}

// confined reports whether what the scope reads is filtered: a tenant's (its own only)
// and a node token's (no group, actor or job).
func confined(scope auth.Scope) bool {
	return scope.IsTenant() || scope.Kind == auth.ScopeNode
}

// unary is the GCS's interceptor of unary calls (after the token check). It runs
// outside statusInterceptors, so it maps its own errors.
func (t *tenancy) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	reply, err := t.unaryChecked(ctx, req, info, handler)
	return reply, statusOf(err)
}

func (t *tenancy) unaryChecked(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	scope := auth.ScopeFrom(ctx)
	if err := allowed(scope, info.FullMethod); err != nil {
		return nil, err
	}
	if !confined(scope) {
		return handler(ctx, req)
	}
	if err := t.check(ctx, scope, req); err != nil {
		return nil, err
	}
	reply, err := handler(ctx, req)
	if err == nil {
		t.filter(scope, reply)
		if named, ok := reply.(*pb.GetNamedActorInfoReply); ok && !t.ownsActor(scope, named.Actor) {
			return nil, errorf(errNotFound, "%s", "no live actor of that name in this token's namespace")
		}
	}
	return reply, err
}

// stream is the GCS's interceptor of streaming calls: only who may call.
func (t *tenancy) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := allowed(auth.ScopeFrom(ss.Context()), info.FullMethod); err != nil {
		return statusOf(err)
	}
	return handler(srv, ss)
}

// queueForNamespace is the queue a namespace's work is charged to ("" without queues).
func (m *pgManager) queueForNamespace(namespace string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admission == nil {
		return ""
	}
	return m.admission.config.QueueForNamespace(namespace)
}
