package gcs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/rs/zerolog"
)

// Actor-manager settings.
const (
	// actorRetryBackoffMin/Max: an actor that found no worker is retried after a backoff
	// that doubles from Min to Max; a node joining, a raylet's resources changing or a
	// placement group becoming CREATED retries every pending actor at once.
	actorRetryBackoffMin = 50 * time.Millisecond
	actorRetryBackoffMax = time.Second
	// actorLeaseTimeout bounds one RequestWorkerLease: the raylet may have to fetch the
	// executable from the GCS and start a process before it answers.
	actorLeaseTimeout = 5 * time.Minute
	// workerReportGrace is how long a failed constructor call waits for the raylet's
	// report of its worker's exit.
	workerReportGrace = time.Second
	// reconcileRetry: how far apart a reconnected raylet's workers are checked again
	// while one of them may belong to a placement in flight.
	reconcileRetry = 2 * time.Second
	// killRetryMin/Max: a KillWorker the raylet could not be reached for is sent again
	// after a backoff that doubles from Min to Max.
	killRetryMin = 100 * time.Millisecond
	killRetryMax = 5 * time.Second
	// actorIDBytes: actor ids are 32 hex characters.
	actorIDBytes = 16
	// defaultNamespace is the namespace of a job that named none (see AddJob).
	defaultNamespace = "default"
)

// Scheduling strategy kinds (SchedulingStrategy.kind).
const (
	strategyDefault        = pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_DEFAULT
	strategySpread         = pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_SPREAD
	strategyPlacementGroup = pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_PLACEMENT_GROUP
	strategyNodeAffinity   = pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_NODE_AFFINITY
)

// Death causes recorded in ActorInfo.death_cause. Worker and node losses without
// restarts left read "<why>; no restarts left (max_restarts=N)", where why is
// "worker exited (<exit detail>)", "node <id> died" or deathKilled.
const (
	deathKilled       = "killed by KillActor"
	deathGroupRemoved = "placement group removed"
	deathJobFinished  = "the job that owns it finished"
)

// actorEntry is one actor in the manager. Guarded by actorManager.mu.
type actorEntry struct {
	info    *pb.ActorInfo // the persisted row
	request resources.Set // info.required_resources, parsed (constant)
	// changed is closed and replaced whenever the actor's state changes.
	changed chan struct{}
	// attempt grows with every scheduling attempt and with every change that ends one
	// (kill, restart, death): a lease or constructor that returns for an older attempt
	// gives its worker back instead of touching the actor.
	attempt int64
	// placing: a goroutine is leasing a worker or running the constructor for attempt.
	placing bool
	retry   retryBackoff
	// creating is the worker running the constructor of the current attempt;
	// cancelCreate stops that call, and creatingLost says why its worker was lost.
	creating     *pb.WorkerInfo
	cancelCreate context.CancelFunc
	creatingLost string
}

func (e *actorEntry) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *actorEntry) pending() bool {
	return e.info.State == pb.ActorState_ACTOR_PENDING_CREATION || e.info.State == pb.ActorState_ACTOR_RESTARTING
}

// heldByAdmission: the actor waits for its queue's quota (it holds no charge and
// admission gave a reason); each round asks admission again.
func (e *actorEntry) heldByAdmission() bool {
	return e.info.Queue == "" && e.info.PendingReasonCode != "" && e.info.SchedulingStrategy.GetPlacementGroupId() == ""
}

func (e *actorEntry) dead() bool { return e.info.State == pb.ActorState_ACTOR_DEAD }

// requestedBundle is the bundle index the actor asked for (-1: none or any).
func (e *actorEntry) requestedBundle() int32 {
	if s := e.info.SchedulingStrategy; s.GetKind() == strategyPlacementGroup {
		return s.BundleIndex
	}
	return resources.AnyBundle
}

// endAttemptLocked invalidates the running attempt: its lease or constructor, when it
// returns, kills its worker.
func (e *actorEntry) endAttemptLocked() {
	e.attempt++
	if e.cancelCreate != nil {
		e.cancelCreate()
	}
	e.placing, e.creating, e.cancelCreate, e.creatingLost = false, nil, nil, ""
}

// actorManager is Ray's GCS actor manager: the actor table, scheduling through the
// raylets' worker leases, restarts and deaths.
//
// Concurrency: every field behind mu, except workerConns (connMu), lastPrune (the
// loop's), the lock-free retryAll/idle/wake, and reconcileRetry/killRetry (constant once the
// server runs; tests shorten them before they make a node connect or a worker die). mu
// is never held while calling the node, job or placement-group managers' locking
// methods; they call the hooks here without holding their own locks, except
// retryAllNow, which takes no lock.
// workerConn is a cached connection to the worker workerID (workerClient).
type workerConn struct {
	conn     *grpc.ClientConn
	workerID string
}

type actorManager struct {
	pb.UnimplementedActorInfoServiceServer
	actorDeps
	// ctx ends when the server stops; every raylet and worker call runs under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	actors map[string]*actorEntry
	names  map[string]string // namespace \x00 name → id, non-DEAD actors only
	// lastPrune is when pruneDead last ran (the loop's own; it prunes once a second).
	lastPrune time.Time

	wake     chan struct{}
	retryAll atomic.Bool
	// idle: the last round found no actor pending, so retryAllNow (a resource report, a
	// group created) need not wake the loop; whatever makes an actor pending kicks it.
	idle atomic.Bool
	// spreadCursor is where the next SPREAD actor's round over the nodes starts;
	// leaseSpreadCursor the same for ChooseLeaseTargets (lock-free).
	spreadCursor      uint64
	leaseSpreadCursor atomic.Uint64

	// reconcileRetry and killRetry: the spacing of reconcile rounds and of KillWorker
	// retries (reconcileRetry and killRetryMin/Max).
	reconcileRetry time.Duration
	killRetry      rpcutil.Backoff

	connMu      sync.Mutex
	workerConns map[string]workerConn // worker address → connection

	// tasks is the SDK's tasks waiting for a worker, for the autoscaler.
	tasks taskBacklogs
	// leaseReturns: ledger ids of lease charges to give back (actors that died or lost
	// their worker), handed to leases at the next round, without mu.
	leaseReturns []string
}

// actorDeps is what the actor manager is given: the store, the tables it reads, the
// clock and the retention of dead actors.
type actorDeps struct {
	store       store.Store
	nodes       nodeDirectory
	groups      groupDirectory
	jobs        jobDirectory
	executables executableChecker
	// leases charges actors outside placement groups to their queue (nil: never).
	leases leaseAdmitter
	now    func() time.Time
	log    zerolog.Logger
	// deadActorRetention and maxDeadActors are Config.DeadActorRetention and MaxDeadActors.
	deadActorRetention time.Duration
	maxDeadActors      int
	// gcsCredentialSHA256 is the SHA-256 of the GCS's own credential (gcsCredential), ""
	// with auth off: its calls to a worker carry auth.WorkerCredential of it, never the
	// cluster token nor the GCS's credential, which a tenant's actor code could read from
	// the call's metadata.
	gcsCredentialSHA256 string
	// freeFunctions deletes functions from the KV (kvService.deleteFunctions): the class
	// of a detached Python actor whose job ended, once no live actor uses it (nil: never).
	freeFunctions func(keys ...string)
}

// executableChecker tells whether a worker executable is uploaded (and counts the check
// as a use of it).
type executableChecker interface {
	has(ctx context.Context, sha string) (bool, error)
}

func newActorManager(deps actorDeps) *actorManager {
	ctx, cancel := context.WithCancel(context.Background())
	return &actorManager{actorDeps: deps, ctx: ctx, cancel: cancel, actors: map[string]*actorEntry{}, names: map[string]string{},
		wake: make(chan struct{}, 1), workerConns: map[string]workerConn{},
		reconcileRetry: reconcileRetry, killRetry: rpcutil.Backoff{Min: killRetryMin, Max: killRetryMax}}
}

// kick makes the scheduling loop run a round soon.
func (m *actorManager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// retryAllNow is called when capacity may have appeared (a node joined, a raylet's
// resources changed, a placement group became CREATED): the next round ignores backoff.
// It takes no lock, so other managers may call it holding theirs.
func (m *actorManager) retryAllNow() {
	m.retryAll.Store(true)
	if !m.idle.Load() {
		m.kick()
	}
}

func (m *actorManager) close() {
	m.cancel()
	m.connMu.Lock()
	defer m.connMu.Unlock()
	for addr, cached := range m.workerConns {
		_ = cached.conn.Close()
		delete(m.workerConns, addr)
	}
}

// persistLocked writes an actor's row. Callers hold mu, so rows reach the store in the
// order the state changed.
func (m *actorManager) persistLocked(e *actorEntry) error { return m.saveRow(e.info) }

// saveRow writes one actor row.
func (m *actorManager) saveRow(row *pb.ActorInfo) error {
	return putRow(m.store, store.TableActors, row.ActorId, "actor "+row.ActorId, row)
}

func (m *actorManager) logPersistError(err error) {
	if err != nil {
		m.log.Error().Err(err).Msg("actor table write failed")
	}
}

func newActorID() string { return ids.Random(actorIDBytes) }

// load reads the actor table after a restart: ALIVE actors whose node is ALIVE in the
// reloaded node table stay ALIVE; others lost their worker and restart (or die);
// PENDING_CREATION and RESTARTING actors are scheduled again by the loop. Actors whose
// job finished or whose group was removed while a dying GCS could not record it die now.
func (m *actorManager) load(ctx context.Context) error {
	rows, err := m.store.GetAll(ctx, store.TableActors)
	if err != nil {
		return fmt.Errorf("load actor table: %w", err)
	}
	alive := map[string]bool{}
	for _, n := range m.nodes.aliveNodes() {
		alive[n.NodeId] = true
	}
	entries := make([]*actorEntry, 0, len(rows))
	jobDead, groupGone := map[string]bool{}, map[string]bool{}
	for id, raw := range rows {
		info := &pb.ActorInfo{}
		if err := proto.Unmarshal(raw, info); err != nil {
			return fmt.Errorf("load actor table: actor %s: %w", id, err)
		}
		request, err := resources.SetFromFloat(info.RequiredResources)
		if err != nil {
			return fmt.Errorf("load actor table: actor %s: %w", id, err)
		}
		if info.SchedulingStrategy == nil {
			info.SchedulingStrategy = &pb.SchedulingStrategy{Kind: strategyDefault}
		}
		upgradeLegacyKind(info.SchedulingStrategy)
		entries = append(entries, &actorEntry{info: info, request: request, changed: make(chan struct{})})
		if job := m.jobs.get(info.JobId); job == nil || job.IsDead {
			jobDead[info.JobId] = true
		}
		if pg := info.SchedulingStrategy.GetPlacementGroupId(); pg != "" {
			if g := m.groups.info(pg); g == nil || g.State == pb.PlacementGroupState_REMOVED {
				groupGone[pg] = true
			}
		}
	}
	sortActors(entries)
	m.mu.Lock()
	for _, e := range entries {
		m.actors[e.info.ActorId] = e
		if !e.dead() && e.info.Name != "" {
			m.names[nameKey(e.info.Namespace, e.info.Name)] = e.info.ActorId
		}
	}
	for _, e := range entries {
		switch {
		case e.dead():
		case jobDead[e.info.JobId] && !e.info.IsDetached:
			m.buryLocked(e, deathJobFinished)
		case groupGone[e.info.SchedulingStrategy.GetPlacementGroupId()]:
			m.buryLocked(e, deathGroupRemoved)
		case e.info.State == pb.ActorState_ACTOR_ALIVE && !alive[e.info.NodeId]:
			m.workerLostLocked(e, fmt.Sprintf("node %s died", e.info.NodeId))
		}
	}
	// The charges of the actors that kept running (or were admitted) hold on.
	var charged []leaseWork
	for _, e := range entries {
		if !e.dead() && e.info.Queue != "" {
			charged = append(charged, leaseWork{id: actorLeaseID(e.info.ActorId), namespace: e.info.Namespace, resources: e.request, queue: e.info.Queue})
		}
	}
	m.mu.Unlock()
	if m.leases != nil {
		m.leases.restoreLeases(charged)
	}
	return nil
}

// heldNamespaces lists the namespace of each actor that admission holds back (one entry
// per actor), for the queues' pending counts.
func (m *actorManager) heldNamespaces() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.actors {
		if e.pending() && e.heldByAdmission() {
			out = append(out, e.info.Namespace)
		}
	}
	return out
}

// pendingByReason counts the actors waiting for a worker by pending-reason code.
func (m *actorManager) pendingByReason() map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]float64{}
	for _, e := range m.actors {
		if e.pending() {
			out[e.info.PendingReasonCode]++
		}
	}
	return out
}

// pruneDead forgets DEAD actors beyond the configured age and count.
func (m *actorManager) pruneDead() {
	m.mu.Lock()
	var dead []deadRow
	for id, e := range m.actors {
		if e.dead() {
			dead = append(dead, deadRow{ID: id, EndTimeMs: e.info.EndTimeMs})
		}
	}
	drop := deadRowsToPrune(dead, m.now().UnixMilli(), m.deadActorRetention, m.maxDeadActors)
	for _, id := range drop {
		delete(m.actors, id)
	}
	m.mu.Unlock()
	if len(drop) > 0 {
		if _, err := m.store.Delete(context.Background(), store.TableActors, drop...); err != nil {
			m.log.Error().Err(err).Msg("could not delete dead actors")
		}
	}
}

// addExecutableRefs records every listed actor's executable: an actor that is not DEAD
// uses it, a DEAD one used it until its death.
func (m *actorManager) addExecutableRefs(refs executableRefs) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.actors {
		refs.add(e.info.ExecutableSha256, !e.dead(), e.info.EndTimeMs)
	}
}

// upgradeLegacyKind sets the kind of a strategy stored before the kind was an enum.
func upgradeLegacyKind(s *pb.SchedulingStrategy) {
	//lint:ignore SA1019 the one reader of the deprecated field
	legacy := s.LegacyKind
	if legacy == "" {
		return
	}
	if kind, ok := pb.SchedulingStrategyKind_value["SCHEDULING_STRATEGY_"+legacy]; ok {
		s.Kind = pb.SchedulingStrategyKind(kind)
	}
	//lint:ignore SA1019 cleared once read
	s.LegacyKind = ""
}
