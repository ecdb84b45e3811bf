package gcs

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/rs/zerolog"
)

// metaKeyJobCounter is the key in store.TableMeta of the last job number handed out.
const metaKeyJobCounter = "job_counter"

// jobManager owns the job table: each job is a driver's lease, renewed by the client.
// Concurrency: every field behind mu.
type jobManager struct {
	pb.UnimplementedJobInfoServiceServer
	store store.Store
	log   zerolog.Logger
	now   func() time.Time
	// leaseTimeout is Config.JobLeaseTimeout.
	leaseTimeout time.Duration
	// listeners are told (outside mu, in order) of each job that finished or lost its lease.
	listeners []jobListener

	mu   sync.Mutex
	jobs map[string]*pb.JobInfo
}

func newJobManager(st store.Store, log zerolog.Logger, now func() time.Time, leaseTimeout time.Duration) *jobManager {
	return &jobManager{store: st, log: log, now: now, leaseTimeout: leaseTimeout, jobs: map[string]*pb.JobInfo{}}
}

// subscribe adds a listener of dead jobs; call it before the server serves.
func (j *jobManager) subscribe(l jobListener) { j.listeners = append(j.listeners, l) }

var _ jobDirectory = (*jobManager)(nil)

func (j *jobManager) load(ctx context.Context) error {
	rows, err := j.store.GetAll(ctx, store.TableJobs)
	if err != nil {
		return fmt.Errorf("load job table: %w", err)
	}
	now := j.now().UnixMilli()
	j.mu.Lock()
	defer j.mu.Unlock()
	for id, raw := range rows {
		job := &pb.JobInfo{}
		if err := proto.Unmarshal(raw, job); err != nil {
			return fmt.Errorf("load job table: job %s: %w", id, err)
		}
		if !job.IsDead {
			// A driver could not renew while the GCS was down: give it a full lease.
			job.LastRenewalMs = now
		}
		j.jobs[id] = job
	}
	return nil
}

// jobIDHex renders job number n as Ray does: 4 bytes, little-endian, in hex.
func jobIDHex(n int64) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(n))
	return hex.EncodeToString(b[:])
}

func (j *jobManager) persist(ctx context.Context, job *pb.JobInfo) error {
	raw, err := proto.Marshal(job)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", job.JobId, err)
	}
	if err := j.store.Put(ctx, store.TableJobs, job.JobId, raw); err != nil {
		return errorf(errUnavailable, "persist job %s: %v", job.JobId, err)
	}
	return nil
}

func (j *jobManager) AddJob(ctx context.Context, req *pb.AddJobRequest) (*pb.AddJobReply, error) {
	if req.ExecutableSha256 != "" {
		if err := checkSHA256("executable_sha256", req.ExecutableSha256); err != nil {
			return nil, err
		}
	}
	n, err := j.store.Increment(ctx, store.TableMeta, metaKeyJobCounter, 1)
	if err != nil {
		return nil, errorf(errUnavailable, "allocate job id: %v", err)
	}
	now := j.now().UnixMilli()
	if err := checkName("namespace", req.Namespace); err != nil {
		return nil, err
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = "default"
	}
	job := &pb.JobInfo{
		JobId: jobIDHex(n), Namespace: namespace, DriverIp: req.DriverIp, DriverPid: req.DriverPid,
		Entrypoint: req.Entrypoint, StartTimeMs: now, LastRenewalMs: now, ExecutableSha256: req.ExecutableSha256,
	}
	if err := j.persist(ctx, job); err != nil {
		return nil, err
	}
	j.mu.Lock()
	j.jobs[job.JobId] = job
	j.mu.Unlock()
	j.log.Info().Str("job_id", job.JobId).Str("namespace", namespace).Msg("job added")
	return &pb.AddJobReply{Job: proto.Clone(job).(*pb.JobInfo), LeaseTimeoutMs: j.leaseTimeout.Milliseconds()}, nil
}

func (j *jobManager) RenewJobLease(ctx context.Context, req *pb.RenewJobLeaseRequest) (*pb.RenewJobLeaseReply, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.jobs[req.JobId]
	if !ok {
		return nil, errorf(errNotFound, "job_id %s: no such job", req.JobId)
	}
	if job.IsDead {
		return nil, errorf(errFailedPrecondition, "job_id %s: job is finished", req.JobId)
	}
	// Renewals stay in memory: after a GCS restart every live job gets a fresh lease.
	job.LastRenewalMs = j.now().UnixMilli()
	return &pb.RenewJobLeaseReply{}, nil
}

func (j *jobManager) MarkJobFinished(ctx context.Context, req *pb.MarkJobFinishedRequest) (*pb.MarkJobFinishedReply, error) {
	j.mu.Lock()
	_, ok := j.jobs[req.JobId]
	j.mu.Unlock()
	if !ok {
		return nil, errorf(errNotFound, "job_id %s: no such job", req.JobId)
	}
	if err := j.finish(ctx, req.JobId, "driver finished"); err != nil {
		return nil, err
	}
	return &pb.MarkJobFinishedReply{}, nil
}

// finish marks a job dead once, persists it and tells the listeners.
func (j *jobManager) finish(ctx context.Context, jobID, why string) error {
	j.mu.Lock()
	job := j.jobs[jobID]
	if job == nil || job.IsDead {
		j.mu.Unlock()
		return nil
	}
	job.IsDead = true
	job.EndTimeMs = j.now().UnixMilli()
	row := proto.Clone(job).(*pb.JobInfo)
	listeners := j.listeners
	j.mu.Unlock()
	// The job is dead in memory from here on, so its groups and actors go even if the
	// row could not be saved (a restarted GCS finds the job alive, and its lapsed lease
	// finishes it again).
	err := j.persist(ctx, row)
	j.log.Info().Str("job_id", jobID).Str("reason", why).Msg("job finished")
	for _, l := range listeners {
		l.onJobDead(row)
	}
	return err
}

func (j *jobManager) GetAllJobInfo(ctx context.Context, _ *pb.GetAllJobInfoRequest) (*pb.GetAllJobInfoReply, error) {
	j.mu.Lock()
	out := make([]*pb.JobInfo, 0, len(j.jobs))
	for _, job := range j.jobs {
		out = append(out, proto.Clone(job).(*pb.JobInfo))
	}
	j.mu.Unlock()
	sort.Slice(out, func(a, b int) bool {
		return out[a].StartTimeMs < out[b].StartTimeMs || (out[a].StartTimeMs == out[b].StartTimeMs && out[a].JobId < out[b].JobId)
	})
	return &pb.GetAllJobInfoReply{Jobs: out}, nil
}

// reapLoop ends the jobs whose driver stopped renewing, until stop closes.
func (j *jobManager) reapLoop(stop <-chan struct{}) {
	interval := j.leaseTimeout / 10
	if interval > time.Second {
		interval = time.Second
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		deadline := j.now().UnixMilli() - j.leaseTimeout.Milliseconds()
		var expired []string
		j.mu.Lock()
		for id, job := range j.jobs {
			if !job.IsDead && job.LastRenewalMs < deadline {
				expired = append(expired, id)
			}
		}
		j.mu.Unlock()
		for _, id := range expired {
			if err := j.finish(context.Background(), id, "driver lease expired"); err != nil {
				j.log.Error().Err(err).Str("job_id", id).Msg("could not end job")
			}
		}
	}
}

// addExecutableRefs records the executable of every job that names one: a live job
// uses it, a dead one used it until its end.
func (j *jobManager) addExecutableRefs(refs executableRefs) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, job := range j.jobs {
		refs.add(job.ExecutableSha256, !job.IsDead, job.EndTimeMs)
	}
}

// get returns a copy of a job, or nil.
func (j *jobManager) get(id string) *pb.JobInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	if job, ok := j.jobs[id]; ok {
		return proto.Clone(job).(*pb.JobInfo)
	}
	return nil
}
