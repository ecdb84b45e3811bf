package raylet

import (
	"context"
	"errors"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/fielderr"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
)

// nodeManagerService implements pb.NodeManagerServiceServer: the GCS's calls (bundles,
// worker leases, node stats, drain) and the workers' (RegisterWorker). Each handler
// calls the raylet and passes any error through nodeManagerStatus, the only place in
// the package that picks gRPC codes.
type nodeManagerService struct {
	pb.UnimplementedNodeManagerServiceServer
	raylet *Raylet
}

// nodeManagerStatus is the gRPC status of a raylet error as NodeManagerService returns
// it: the code by the error's sentinel, the message the error's text. The checks run
// in order, so an error that wraps two sentinels gets the code of the first one listed
// (a lease that finds no GPU free is ResourceExhausted, not FailedPrecondition). An
// error that is a gRPC status already keeps it; anything else unknown is Internal.
func nodeManagerStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = status.FromContextError(err).Code()
	case errors.Is(err, fielderr.ErrInvalid),
		errors.Is(err, gpu.ErrMIGInvalidStart), errors.Is(err, gpu.ErrMIGUnknownProfile):
		code = codes.InvalidArgument
	case errors.Is(err, ErrNotPrepared), errors.Is(err, ErrUnknownWorker), errors.Is(err, ErrExecutableNotUploaded):
		code = codes.NotFound
	case errors.Is(err, ErrNoRoom):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrStaleEpoch), errors.Is(err, ErrStaleGeneration), errors.Is(err, ErrDraining),
		errors.Is(err, ErrInsufficientResources), errors.Is(err, ErrGPUNotFree), errors.Is(err, ErrBundleNotHeld),
		errors.Is(err, ErrMIGNotReady), errors.Is(err, ErrWorkerRegistered),
		errors.Is(err, gpu.ErrMIGSlotsTaken), errors.Is(err, gpu.ErrMIGModeOff), errors.Is(err, gpu.ErrMIGInUse):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrStopping), errors.Is(err, ErrWorkerStartTimeout), errors.Is(err, ErrExecutableUnavailable):
		code = codes.Unavailable
	case errors.Is(err, ErrWorkerKilled):
		code = codes.Aborted
	case errors.Is(err, ErrExecutableCorrupt):
		code = codes.DataLoss
	}
	return status.Error(code, err.Error())
}

func (s *nodeManagerService) GetNodeStats(ctx context.Context, _ *pb.GetNodeStatsRequest) (*pb.GetNodeStatsReply, error) {
	r := s.raylet
	r.mu.Lock()
	epoch := r.epoch
	var held []*pb.BundleReservation
	for _, id := range r.bundles.sortedIDs() {
		held = append(held, r.bundles.describe(id, r.bundles.reserved[id]))
	}
	r.mu.Unlock()
	return &pb.GetNodeStatsReply{Node: r.Node(), GcsEpoch: epoch, Bundles: held}, nil
}

func (s *nodeManagerService) DrainRaylet(ctx context.Context, req *pb.DrainRayletRequest) (*pb.DrainRayletReply, error) {
	r := s.raylet
	r.mu.Lock()
	r.draining = true
	r.resourcesChangedLocked() // queued lease requests fail at once
	r.mu.Unlock()
	r.log.Info().Str("reason", req.Reason).Msg("draining: taking no new work")
	return &pb.DrainRayletReply{}, nil
}

func (s *nodeManagerService) PrepareBundleResources(ctx context.Context, req *pb.PrepareBundleResourcesRequest) (*pb.PrepareBundleResourcesReply, error) {
	r := s.raylet
	if len(req.Cancel) > 0 {
		// Released whatever the prepare's outcome: the GCS counts them released once the
		// call returns, refused or not, as after a CancelResourceReserve.
		r.cancelBundles(req.Cancel)
	}
	var made []*pb.BundleReservation
	report, err := r.changeBundles(func() error {
		if err := r.bundles.prepare(r.cfg.NodeID, req.Bundles, r.epoch, r.draining); err != nil {
			return err
		}
		if req.Commit {
			keys := make([]*pb.BundleKey, len(req.Bundles))
			for i, b := range req.Bundles {
				keys[i] = b.Key
			}
			if err := r.bundles.commit(keys); err != nil {
				r.bundles.cancel(keys)
				return err
			}
		}
		r.killOrphanedWorkersLocked("placement group bundle rescheduled") // a newer generation replaced a held one
		for _, b := range req.Bundles {
			made = append(made, r.bundles.describeBundle(b.Key))
		}
		return nil
	})
	if err != nil {
		r.log.Info().Err(err).Int("bundles", len(req.Bundles)).Msg("prepare refused")
		return nil, nodeManagerStatus(err)
	}
	return &pb.PrepareBundleResourcesReply{Resources: report, Bundles: made}, nil
}

func (s *nodeManagerService) CommitBundleResources(ctx context.Context, req *pb.CommitBundleResourcesRequest) (*pb.CommitBundleResourcesReply, error) {
	r := s.raylet
	report, err := r.changeBundles(func() error { return r.bundles.commit(req.Bundles) })
	if err != nil {
		return nil, nodeManagerStatus(err)
	}
	return &pb.CommitBundleResourcesReply{Resources: report}, nil
}

func (s *nodeManagerService) CancelResourceReserve(ctx context.Context, req *pb.CancelResourceReserveRequest) (*pb.CancelResourceReserveReply, error) {
	return &pb.CancelResourceReserveReply{Resources: s.raylet.cancelBundles(req.Bundles)}, nil
}

// cancelBundles releases bundles (CancelResourceReserve, or the cancels riding on a
// prepare), kills the workers they leave orphaned, and returns the resources after.
func (r *Raylet) cancelBundles(keys []*pb.BundleKey) *pb.ResourceReport {
	report, _ := r.changeBundles(func() error {
		r.bundles.cancel(keys)
		r.killOrphanedWorkersLocked("placement group removed")
		return nil
	})
	return report
}

func (s *nodeManagerService) ReleaseUnusedBundles(ctx context.Context, req *pb.ReleaseUnusedBundlesRequest) (*pb.ReleaseUnusedBundlesReply, error) {
	r := s.raylet
	var released, held []*pb.BundleReservation
	report, _ := r.changeBundles(func() error {
		released, held = r.bundles.releaseUnused(req.InUse, r.epoch)
		r.killOrphanedWorkersLocked("placement group bundle released by the GCS")
		return nil
	})
	for _, b := range released {
		r.log.Info().Str("pg_id", b.Key.PlacementGroupId).Int32("bundle", b.Key.BundleIndex).
			Int64("generation", b.Key.Generation).Msg("released an orphaned bundle")
	}
	return &pb.ReleaseUnusedBundlesReply{Released: released, Held: held, Resources: report}, nil
}

func (s *nodeManagerService) RequestWorkerLease(ctx context.Context, req *pb.RequestWorkerLeaseRequest) (*pb.RequestWorkerLeaseReply, error) {
	reply, err := s.raylet.requestWorkerLease(ctx, req)
	if err != nil {
		return nil, nodeManagerStatus(err)
	}
	return reply, nil
}

func (s *nodeManagerService) ReturnWorker(ctx context.Context, req *pb.ReturnWorkerRequest) (*pb.ReturnWorkerReply, error) {
	r := s.raylet
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[req.WorkerId]; w != nil && (w.state == workerLeased || w.state == workerIdle && req.Disconnect) {
		r.returnWorkerLocked(w, req.Disconnect)
	}
	return &pb.ReturnWorkerReply{Resources: r.resourceReportLocked()}, nil
}

func (s *nodeManagerService) KillWorker(ctx context.Context, req *pb.KillWorkerRequest) (*pb.KillWorkerReply, error) {
	r := s.raylet
	reason := req.Reason
	if reason == "" {
		reason = "KillWorker"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.workers[req.WorkerId]; w != nil {
		r.killWorkerLocked(w, reason)
	}
	return &pb.KillWorkerReply{Resources: r.resourceReportLocked()}, nil
}

func (s *nodeManagerService) KillJobWorkers(ctx context.Context, req *pb.KillJobWorkersRequest) (*pb.KillJobWorkersReply, error) {
	killed, err := s.raylet.killJobWorkers(req.JobId)
	if err != nil {
		return nil, nodeManagerStatus(err)
	}
	return &pb.KillJobWorkersReply{Killed: killed}, nil
}

func (s *nodeManagerService) RegisterWorker(ctx context.Context, req *pb.RegisterWorkerRequest) (*pb.RegisterWorkerReply, error) {
	if err := s.raylet.registerWorker(req.WorkerId, req.Address); err != nil {
		return nil, nodeManagerStatus(err)
	}
	return &pb.RegisterWorkerReply{}, nil
}

func (s *nodeManagerService) NotifyWorkerBlocked(ctx context.Context, req *pb.NotifyWorkerBlockedRequest) (*pb.NotifyWorkerBlockedReply, error) {
	if err := s.raylet.setWorkerBlocked(req.WorkerId, req.Blocked); err != nil {
		return nil, nodeManagerStatus(err)
	}
	return &pb.NotifyWorkerBlockedReply{}, nil
}

func (s *nodeManagerService) GetWorkers(ctx context.Context, _ *pb.GetWorkersRequest) (*pb.GetWorkersReply, error) {
	r := s.raylet
	r.mu.Lock()
	defer r.mu.Unlock()
	reply := &pb.GetWorkersReply{}
	for _, w := range r.workers {
		if w.state != workerStarting {
			reply.Workers = append(reply.Workers, r.describeWorkerLocked(w))
		}
	}
	slices.SortFunc(reply.Workers, func(a, b *pb.WorkerInfo) int { return strings.Compare(a.WorkerId, b.WorkerId) })
	return reply, nil
}
