package gcs

import (
	"bytes"
	"context"
	"sort"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/admission/queues"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/fielderr"
)

// queuesKey is the running queue configuration's key in store.TableQueues.
const queuesKey = "config"

// loadQueueConfig returns the queue configuration to run: the one in the store (a
// `raygo queues apply` wins over the start's file; a difference is logged), else the
// start's file, which then seeds the store. Nil without --queues.
func (s *Server) loadQueueConfig(ctx context.Context, fromFlag []byte) (*queues.Config, error) {
	if len(fromFlag) == 0 {
		return nil, nil
	}
	stored, found, err := s.store.Get(ctx, store.TableQueues, queuesKey)
	if err != nil {
		return nil, err
	}
	source := fromFlag
	if found {
		if !bytes.Equal(stored, fromFlag) {
			s.log.Warn().Msg("the queue configuration in the store (from raygo queues apply) differs from --queues; running the stored one")
		}
		source = stored
	} else if err := s.store.Put(ctx, store.TableQueues, queuesKey, fromFlag); err != nil {
		return nil, err
	}
	return queues.Load(source)
}

// queueService implements pb.QueueServiceServer over the placement-group manager.
type queueService struct {
	pb.UnimplementedQueueServiceServer
	m *pgManager
	// heldActors lists the namespaces of the actors admission holds back; nil: none.
	heldActors func() []string
}

// queueService is the server's QueueService, counting the actors admission holds back as
// pending beside the groups.
func (s *Server) queueService() queueService {
	return queueService{m: s.pgs, heldActors: s.actors.heldNamespaces}
}

// ApplyQueues implements pb.QueueServiceServer.
func (q queueService) ApplyQueues(ctx context.Context, req *pb.ApplyQueuesRequest) (*pb.ApplyQueuesReply, error) {
	m := q.m
	cfg, err := queues.Load(req.ConfigYaml)
	if err != nil {
		return nil, errorf(fielderr.ErrInvalid, "%s", err.Error())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admission == nil {
		return nil, errorf(errFailedPrecondition, "%s", "this GCS runs without queues: start the head with --queues FILE to turn admission on")
	}
	if err := m.store.Put(ctx, store.TableQueues, queuesKey, req.ConfigYaml); err != nil {
		return nil, errorf(errUnavailable, "queue configuration not applied, it could not be saved: %v", err)
	}
	m.admission.config = cfg
	m.admission.dirty = true
	m.kick()
	m.log.Info().Int("queues", len(cfg.Queues)).Msg("queue configuration applied")
	return &pb.ApplyQueuesReply{}, nil
}

// ListQueues implements pb.QueueServiceServer.
func (q queueService) ListQueues(ctx context.Context, _ *pb.ListQueuesRequest) (*pb.ListQueuesReply, error) {
	m := q.m
	var heldActors []string
	if q.heldActors != nil {
		heldActors = q.heldActors() // before m.mu: the actor manager calls into m holding its own lock
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admission == nil {
		return &pb.ListQueuesReply{}, nil
	}
	var waiting []admission.Workload
	for _, namespace := range heldActors {
		waiting = append(waiting, admission.Workload{Queue: m.admission.config.QueueForNamespace(namespace)})
	}
	for _, s := range m.queue.shapes {
		for _, e := range s.entries {
			if !m.admission.ledger.Holds(e.info.PlacementGroupId) {
				waiting = append(waiting, admission.Workload{ID: e.info.PlacementGroupId, Queue: e.info.Queue})
			}
		}
	}
	reply := &pb.ListQueuesReply{Enabled: true}
	for _, st := range admission.Status(m.admission.config, m.admission.ledger.Usage(), waiting) {
		out := &pb.QueueStatus{Queue: st.Queue, Cohort: st.Cohort, Pending: int32(st.Pending), DominantShare: st.DominantShare}
		names := make([]string, 0, len(st.Resources))
		for name := range st.Resources {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			r := st.Resources[name]
			limit := r.BorrowingLimit.Float()
			if r.BorrowingLimit == queues.Unlimited {
				limit = -1
			}
			out.Resources = append(out.Resources, &pb.QueueResourceStatus{Resource: name, Limited: r.Limited,
				NominalQuota: r.Nominal.Float(), BorrowingLimit: limit, Usage: r.Usage.Float(), Borrowed: r.Borrowed.Float(), Lent: r.Lent.Float()})
		}
		reply.Queues = append(reply.Queues, out)
	}
	return reply, nil
}
