package gcs

import (
	"context"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// BundleReserver is the raylet side of the two-phase reservation of placement-group
// bundles, one node at a time: prepare (reserve, carving MIG slices), commit (make it
// the group's), cancel (release), and release-unused (a reconnected raylet drops what
// this GCS does not know). The placement-group manager drives it and never calls a
// raylet otherwise.
//
// Concurrency: safe for concurrent use; calls to different nodes run in parallel. Every
// call is bounded by its ctx. The raylet makes each call idempotent per bundle key and
// generation, and refuses calls from an older GCS epoch, so a retried or late call never
// double-allocates.
type BundleReserver interface {
	// Prepare reserves bundles on a node and returns them with what the raylet chose
	// (GPU indices, MIG device UUIDs), and the node's resources after it.
	Prepare(ctx context.Context, nodeID string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error)
	// Commit makes prepared bundles the group's.
	Commit(ctx context.Context, nodeID string, bundles []*pb.BundleKey) (*pb.ResourceReport, error)
	// Cancel releases bundles, prepared or committed; unknown ones are no error.
	Cancel(ctx context.Context, nodeID string, bundles []*pb.BundleKey) (*pb.ResourceReport, error)
	// ReleaseUnused releases every bundle the node holds that is not in inUse.
	ReleaseUnused(ctx context.Context, nodeID string, inUse []*pb.BundleKey) (*pb.ReleaseUnusedBundlesReply, error)
}

// prepareCommitter is a BundleReserver that can also prepare and commit bundles on one
// node in a single step (all or nothing). The GCS uses it for a group whose bundles all
// go to one node, where two phases add only a round trip: the raylet holds the bundles
// committed once it answers, and a GCS that dies before persisting CREATED leaves them
// to the release of unknown bundles when the raylet reconnects. Reservers without it
// (test doubles that stop between the phases) get the two phases.
//
// cancel are bundles of removed groups on the node to release first, as Cancel does
// (the raylet does so also when it refuses the prepare; the GCS sends them again on
// their own after any failure, as a call may fail before they were applied).
type prepareCommitter interface {
	PrepareCommit(ctx context.Context, nodeID string, bundles []*pb.BundleReservation, cancel []*pb.BundleKey) ([]*pb.BundleReservation, *pb.ResourceReport, error)
}

// rayletReserver is the BundleReserver over gRPC: each node's raylet, through the
// node table's connections (which carry this GCS's epoch on every call).
type rayletReserver struct {
	nodes nodeDirectory
}

var (
	_ BundleReserver   = rayletReserver{}
	_ prepareCommitter = rayletReserver{}
)

func (r rayletReserver) Prepare(ctx context.Context, nodeID string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
	client, err := r.nodes.rayletClient(nodeID)
	if err != nil {
		return nil, nil, err
	}
	reply, err := client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: bundles})
	return reply.GetBundles(), reply.GetResources(), err
}

// PrepareCommit implements prepareCommitter.
func (r rayletReserver) PrepareCommit(ctx context.Context, nodeID string, bundles []*pb.BundleReservation, cancel []*pb.BundleKey) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
	client, err := r.nodes.rayletClient(nodeID)
	if err != nil {
		return nil, nil, err
	}
	reply, err := client.PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: bundles, Commit: true, Cancel: cancel})
	return reply.GetBundles(), reply.GetResources(), err
}

func (r rayletReserver) Commit(ctx context.Context, nodeID string, bundles []*pb.BundleKey) (*pb.ResourceReport, error) {
	client, err := r.nodes.rayletClient(nodeID)
	if err != nil {
		return nil, err
	}
	reply, err := client.CommitBundleResources(ctx, &pb.CommitBundleResourcesRequest{Bundles: bundles})
	return reply.GetResources(), err
}

func (r rayletReserver) Cancel(ctx context.Context, nodeID string, bundles []*pb.BundleKey) (*pb.ResourceReport, error) {
	client, err := r.nodes.rayletClient(nodeID)
	if err != nil {
		return nil, err
	}
	reply, err := client.CancelResourceReserve(ctx, &pb.CancelResourceReserveRequest{Bundles: bundles})
	return reply.GetResources(), err
}

func (r rayletReserver) ReleaseUnused(ctx context.Context, nodeID string, inUse []*pb.BundleKey) (*pb.ReleaseUnusedBundlesReply, error) {
	client, err := r.nodes.rayletClient(nodeID)
	if err != nil {
		return nil, err
	}
	return client.ReleaseUnusedBundles(ctx, &pb.ReleaseUnusedBundlesRequest{InUse: inUse})
}
