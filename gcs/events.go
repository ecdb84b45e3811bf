package gcs

import (
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The GCS managers never hold a pointer to one another. Each reads the others through the
// narrow interfaces below and learns of their changes by subscribing; Start wires them.
// Lock order follows from it: a manager calls a directory or a listener only without its
// own lock held, so no two manager locks are ever held at once.

// nodeDirectory is what the placement-group and actor managers read of the node table.
// Safe for concurrent use.
type nodeDirectory interface {
	// aliveNodes returns copies of the ALIVE nodes.
	aliveNodes() []*pb.NodeInfo
	// schedulingNodes returns read-only views of the ALIVE nodes that share the table's
	// maps and slices (never modified in place): what a scheduler reads, without copying.
	schedulingNodes() []*pb.NodeInfo
	// rayletAddress is a node's raylet address ("" for an unknown node).
	rayletAddress(nodeID string) string
	// applyResourceReport records the resources a raylet reported with a reply.
	applyResourceReport(nodeID string, report *pb.ResourceReport)
	// noteWork records that work came to or left the node now (a bundle call): the
	// node's idle clock restarts (autoscaler_state.go).
	noteWork(nodeID string)
	// draining reports whether the node is marked draining (it takes no new work).
	draining(nodeID string) bool
	// rayletClient returns a client of an ALIVE node's raylet whose calls carry this
	// GCS's epoch.
	rayletClient(nodeID string) (pb.NodeManagerServiceClient, error)
}

// jobDirectory is what the other managers read of the job table.
type jobDirectory interface {
	// get returns a copy of a job, or nil.
	get(jobID string) *pb.JobInfo
}

// groupDirectory is what the actor manager reads of the placement-group table.
type groupDirectory interface {
	// info returns a copy of a group's row, or nil for an unknown group.
	info(placementGroupID string) *pb.PlacementGroupInfo
}

// nodeListener hears of node changes. Calls come without any manager lock held;
// onNodeConnected runs in a goroutine of its own, so it may call raylets.
type nodeListener interface {
	// onNodeConnected: a raylet registered, or reconnected after a GCS restart.
	onNodeConnected(node *pb.NodeInfo)
	// onNodeDead: a node died; whatever it held is gone.
	onNodeDead(nodeID string)
	// onNodeRegistered: a node joined (or re-registered), so waiting work may fit now.
	onNodeRegistered(node *pb.NodeInfo)
	// onResourcesReported: a raylet reported newer available resources; hasMIG: the
	// node has MIG GPUs, and the report carried their slot maps.
	onResourcesReported(hasMIG bool)
}

// jobListener hears of jobs that finished or lost their driver's lease.
type jobListener interface {
	onJobDead(job *pb.JobInfo)
}

// groupListener hears of placement groups that were removed or became CREATED.
type groupListener interface {
	// onPlacementGroupRemoved runs before the group's bundles are cancelled on the raylets.
	onPlacementGroupRemoved(placementGroupID string)
	onPlacementGroupCreated(placementGroupID string)
}

// leaseAdmitter charges work outside placement groups (actors' workers, the SDK's task
// leases) to its job's queue, in the ledger admission keeps for groups (pg_admission.go,
// lease_admission.go). Safe for concurrent use; callers hold none of their locks.
type leaseAdmitter interface {
	// admitLeases decides which leases may start under their queues' quotas now and
	// charges them; an id charged already stays admitted. Off (no queue configuration):
	// nothing is charged and every lease may start.
	admitLeases(leases []leaseWork) leaseDecision
	// returnLeases gives the charges of ended leases back (ids without one are ignored).
	returnLeases(ids []string)
	// restoreLeases charges leases that ran before a GCS restart, whatever the quota
	// says now (an apply that lowers a quota evicts nothing either).
	restoreLeases(leases []leaseWork)
}
