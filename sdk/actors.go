package sdk

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Actor is a handle on an actor. Calls made through one handle run in the order they
// were made; the handle sends the next call when the previous one finished. Its
// methods are safe for concurrent use.
type Actor struct {
	c         *Client
	ID        string
	Name      string
	ClassName string
	typ       *actorType

	// where is shared by every handle of the actor in this client.
	where *incarnation

	mu      sync.Mutex
	queue   []*actorCall
	sending bool
}

// incarnation is what a client knows of where an actor's calls go: its worker address
// and restart count, or its death cause once DEAD. One watch per actor and client
// keeps it current, however many handles the program makes.
type incarnation struct {
	mu          sync.Mutex
	address     string
	numRestarts int64
	deathCause  string
	watchOnce   sync.Once
}

type actorCall struct {
	ctx     context.Context
	ref     *ObjectRef
	method  string
	args    [][]byte
	refArgs map[int]*ObjectRef
	retries int64
}

// ActorInfo is one row of the actor table (Ray's state API fields).
type ActorInfo struct {
	ID        string
	ClassName string
	Name      string
	Namespace string
	JobID     string
	// State is PENDING_CREATION, ALIVE, RESTARTING or DEAD.
	State string
	// Where the current worker runs (empty while it has none).
	NodeID   string
	PID      int
	WorkerID string
	Address  string
	// The bundle it holds resources from ("" and -1 outside placement groups).
	PlacementGroupID string
	BundleIndex      int
	// GPUIDs and CUDAVisibleDevices are its worker's GPUs.
	GPUIDs             []int
	CUDAVisibleDevices string
	Resources          map[string]float64
	IsDetached         bool
	NumRestarts        int
	MaxRestarts        int
	// DeathCause says why it is DEAD; PendingReason why it is not ALIVE yet.
	DeathCause    string
	PendingReason string
}

func actorInfoFromProto(p *pb.ActorInfo) *ActorInfo {
	info := &ActorInfo{
		ID: p.ActorId, ClassName: p.ClassName, Name: p.Name, Namespace: p.Namespace, JobID: p.JobId,
		State: strings.TrimPrefix(p.State.String(), "ACTOR_"), NodeID: p.NodeId, PID: int(p.Pid), WorkerID: p.WorkerId,
		Address: p.Address, PlacementGroupID: p.PlacementGroupId, BundleIndex: int(p.BundleIndex),
		CUDAVisibleDevices: p.CudaVisibleDevices, Resources: p.RequiredResources, IsDetached: p.IsDetached,
		NumRestarts: int(p.NumRestarts), MaxRestarts: int(p.MaxRestarts), DeathCause: p.DeathCause, PendingReason: p.PendingReason,
	}
	for _, id := range p.GpuIds {
		info.GPUIDs = append(info.GPUIDs, int(id))
	}
	return info
}

// CreateActor starts an actor of a registered type (Ray's Actor.remote): the GCS finds
// it a worker — inside a placement-group bundle with InPlacementGroup — and runs its
// constructor there with args. It returns once the GCS accepted the actor; calls made
// before it is ALIVE wait for it. Bad input fails here with ErrInvalidArgument naming
// the field (a request larger than its bundle names the bundle); a live actor with the
// same name fails with ErrAlreadyExists.
func (c *Client) CreateActor(ctx context.Context, className string, args []any, opts ...Option) (*Actor, error) {
	o := newCallOptions(opts)
	at, err := lookupActor(className)
	if err != nil {
		return nil, err
	}
	encoded, err := at.constructor.encodeArgs(fmt.Sprintf("actor %q constructor", className), args)
	if err != nil {
		return nil, err
	}
	if len(refArgs(args)) > 0 {
		return nil, fmt.Errorf("%w: actor %q: pass values, not ObjectRefs, to a constructor (Get them first)", ErrInvalidArgument, className)
	}
	if err := c.requireExecutable(fmt.Sprintf("actor %q", className)); err != nil {
		return nil, err
	}
	resources, err := o.resourcesFor(0)
	if err != nil {
		return nil, fmt.Errorf("actor %q: %w", className, err)
	}
	strategy := o.schedulingStrategy(-1)
	namespace := o.namespace
	if namespace == "" {
		namespace = c.namespace
	}
	reply, err := c.actors.CreateActor(ctx, &pb.CreateActorRequest{
		JobId: c.jobID, ClassName: className, Name: o.name, Namespace: namespace, RequiredResources: resources,
		SchedulingStrategy: strategy, IsDetached: o.detached, MaxRestarts: o.maxRestarts, MaxTaskRetries: o.maxTaskRetries,
		ExecutableSha256: c.executable, ConstructorArgs: encoded,
	})
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("create actor %q", className), err)
	}
	return c.actorHandle(reply.Actor, at), nil
}

func (c *Client) actorHandle(p *pb.ActorInfo, at *actorType) *Actor {
	c.actorsMu.Lock()
	where, ok := c.incarnations[p.ActorId]
	if !ok {
		where = &incarnation{}
		c.incarnations[p.ActorId] = where
	}
	c.actorsMu.Unlock()
	a := &Actor{c: c, ID: p.ActorId, Name: p.Name, ClassName: p.ClassName, typ: at, where: where}
	a.learn(p)
	return a
}

// GetActor finds a live named actor (Ray's ray.get_actor) in the client's namespace,
// or in the one ActorNamespace gives. Its type must be registered in this program.
func (c *Client) GetActor(ctx context.Context, name string, opts ...Option) (*Actor, error) {
	namespace := newCallOptions(opts).namespace
	if namespace == "" {
		namespace = c.namespace
	}
	reply, err := c.actors.GetNamedActorInfo(ctx, &pb.GetNamedActorInfoRequest{Name: name, Namespace: namespace})
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get actor %q in namespace %q", name, namespace), err)
	}
	at, err := lookupActor(reply.Actor.ClassName)
	if err != nil {
		return nil, err
	}
	return c.actorHandle(reply.Actor, at), nil
}

// ListActors returns the actor table: live actors and recently DEAD ones.
func (c *Client) ListActors(ctx context.Context) ([]*ActorInfo, error) {
	reply, err := c.actors.GetAllActorInfo(ctx, &pb.GetAllActorInfoRequest{})
	if err != nil {
		return nil, c.wrap("list actors", err)
	}
	out := make([]*ActorInfo, len(reply.Actors))
	for i, a := range reply.Actors {
		out[i] = actorInfoFromProto(a)
	}
	return out, nil
}

// Info returns the actor's row of the actor table.
func (a *Actor) Info(ctx context.Context) (*ActorInfo, error) {
	reply, err := a.c.actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: a.ID})
	if err != nil {
		return nil, a.c.wrap("actor "+a.ID, err)
	}
	return actorInfoFromProto(reply.Actor), nil
}

// Ready blocks until the actor is ALIVE and returns its row; it fails with
// ErrActorDied (and the death cause) when the actor is DEAD.
func (a *Actor) Ready(ctx context.Context) (*ActorInfo, error) {
	p, err := a.waitAlive(ctx, 0)
	if err != nil {
		return nil, err
	}
	return actorInfoFromProto(p), nil
}

// waitAlive waits for an ALIVE incarnation with at least minRestarts restarts.
func (a *Actor) waitAlive(ctx context.Context, minRestarts int64) (*pb.ActorInfo, error) {
	reply, err := a.c.actors.GetActorInfo(ctx, &pb.GetActorInfoRequest{ActorId: a.ID, WaitAlive: true, MinNumRestarts: minRestarts})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("actor %s (%s) not alive: %w", a.ID, a.ClassName, ctx.Err())
		}
		return nil, a.c.wrap("actor "+a.ID, err)
	}
	if reply.Actor.State == pb.ActorState_ACTOR_DEAD {
		// The handle learns it too: later calls fail at once instead of reaching a
		// worker that is still being stopped.
		a.learn(reply.Actor)
		return nil, fmt.Errorf("actor %s (%s): %w: %s", a.ID, a.ClassName, ErrActorDied, reply.Actor.DeathCause)
	}
	return reply.Actor, nil
}

// Kill kills the actor's worker (Ray's ray.kill). With noRestart it becomes DEAD;
// otherwise it restarts if it has restarts left.
func (a *Actor) Kill(ctx context.Context, noRestart bool) error {
	if _, err := a.c.actors.KillActor(ctx, &pb.KillActorRequest{ActorId: a.ID, NoRestart: noRestart}); err != nil {
		return a.c.wrap("kill actor "+a.ID, err)
	}
	return nil
}

// Call calls a method of the actor (Ray's actor.method.remote) and returns a ref to its
// result. The method and argument types are checked here. Calls through one handle run
// in order. When the actor's worker dies during a call, the call is sent again to the
// restarted actor up to WithMaxTaskRetries times, else it fails with ErrActorDied; calls
// to a DEAD actor fail with ErrActorDied and its death cause.
func (a *Actor) Call(ctx context.Context, method string, args ...any) (*ObjectRef, error) {
	m, err := a.typ.method(method)
	if err != nil {
		return nil, err
	}
	encoded, err := m.encodeArgs(fmt.Sprintf("%s.%s", a.ClassName, method), args)
	if err != nil {
		return nil, err
	}
	call := &actorCall{ctx: ctx, ref: newObjectRef(newTaskID()), method: method, args: encoded, refArgs: refArgs(args)}
	a.where.watchOnce.Do(func() { go a.watch() })
	a.mu.Lock()
	a.queue = append(a.queue, call)
	if !a.sending {
		a.sending = true
		go a.send()
	}
	a.mu.Unlock()
	return call.ref, nil
}

// send delivers the handle's calls one after the other, in order.
func (a *Actor) send() {
	for {
		a.mu.Lock()
		if len(a.queue) == 0 {
			a.sending = false
			a.mu.Unlock()
			return
		}
		call := a.queue[0]
		a.queue = a.queue[1:]
		a.mu.Unlock()
		value, where, err := a.deliver(call)
		call.ref.complete(value, err, where)
	}
}

// deliver sends one call to the actor's current incarnation, following restarts.
// Calls are at most once, as Ray's: a call in flight when the worker died is sent
// again only while WithMaxTaskRetries allows.
func (a *Actor) deliver(call *actorCall) ([]byte, Placement, error) {
	function := a.ClassName + "." + call.method
	args, err := resolveArgs(call.ctx, call.args, call.refArgs)
	if err != nil {
		return nil, Placement{}, fmt.Errorf("%s: %w", function, err)
	}
	backoff := rpcutil.Backoff{Min: 20 * time.Millisecond, Max: time.Second}
	lostIncarnation := ""
	for {
		address, restarts, err := a.target(call.ctx)
		if err != nil {
			return nil, Placement{}, fmt.Errorf("%s: %w", function, err)
		}
		conn, err := a.c.connTo(address)
		if err != nil {
			return nil, Placement{}, fmt.Errorf("%s: %w", function, err)
		}
		// sentTo stays empty when the call never had a connection to send on (a worker
		// that is gone refuses it): nothing of it reached a worker.
		var sentTo peer.Peer
		reply, err := pb.NewCoreWorkerServiceClient(conn).PushTask(call.ctx, &pb.PushTaskRequest{
			TaskId: call.ref.id, FunctionName: call.method, ActorId: a.ID, Args: args, Attempt: int32(call.retries),
		}, grpc.Peer(&sentTo))
		if err == nil {
			return firstReturn(reply), Placement{WorkerID: reply.WorkerId, PID: int(reply.Pid)}, taskError(function, reply.Error)
		}
		if call.ctx.Err() != nil {
			return nil, Placement{}, fmt.Errorf("%s abandoned: %w", function, call.ctx.Err())
		}
		if code := status.Code(err); code != codes.Unavailable && code != codes.FailedPrecondition && code != codes.Canceled {
			return nil, Placement{}, fmt.Errorf("%s: %w", function, err)
		}
		current, infoErr := a.c.actors.GetActorInfo(call.ctx, &pb.GetActorInfoRequest{ActorId: a.ID})
		if infoErr != nil {
			return nil, Placement{}, fmt.Errorf("%s: actor %s: %w: its worker did not answer: %v", function, a.ID, ErrActorDied, a.c.wrap("actor "+a.ID, infoErr))
		}
		actor := current.Actor
		if actor.State == pb.ActorState_ACTOR_DEAD {
			return nil, Placement{}, fmt.Errorf("%s: actor %s: %w: %s", function, a.ID, ErrActorDied, actor.DeathCause)
		}
		// One retry per incarnation lost: failing again on the same worker while the
		// GCS has not heard of its death yet is still the same loss. A call that was
		// never sent (the handle still knew an incarnation that had died before it) lost
		// nothing: it goes to the next one.
		if lost := fmt.Sprintf("%s#%d", address, restarts); lost != lostIncarnation && sentTo.Addr != nil {
			lostIncarnation = lost
			call.retries++
			if limit := actor.MaxTaskRetries; limit >= 0 && call.retries > limit {
				return nil, Placement{}, fmt.Errorf("%s: actor %s: %w: its worker died during the call (max_task_retries=%d): %s",
					function, a.ID, ErrActorDied, limit, status.Convert(err).Message())
			}
		}
		a.c.forgetConn(address)
		if actor.State == pb.ActorState_ACTOR_ALIVE && actor.NumRestarts == restarts && actor.Address == address {
			// The GCS still sees this incarnation alive: a lost connection, or a death
			// it has not heard of yet. Try the same worker again after a pause.
			select {
			case <-call.ctx.Done():
			case <-time.After(backoff.Next()):
			}
			continue
		}
		// This incarnation is gone: wait for a newer one.
		w := a.where
		w.mu.Lock()
		if w.address == address {
			w.address, w.numRestarts = "", max(w.numRestarts, restarts+1)
		}
		w.mu.Unlock()
	}
}

// target returns the address and restart count calls go to, waiting for the
// actor to be ALIVE when the handle knows no live worker.
func (a *Actor) target(ctx context.Context) (string, int64, error) {
	w := a.where
	w.mu.Lock()
	address, restarts, dead := w.address, w.numRestarts, w.deathCause
	w.mu.Unlock()
	if dead != "" {
		return "", 0, fmt.Errorf("actor %s (%s): %w: %s", a.ID, a.ClassName, ErrActorDied, dead)
	}
	if address != "" {
		return address, restarts, nil
	}
	alive, err := a.waitAlive(ctx, restarts)
	if err != nil {
		return "", 0, err
	}
	a.learn(alive)
	return alive.Address, alive.NumRestarts, nil
}

// learn records a newer incarnation, or the actor's death, in the handle.
func (a *Actor) learn(p *pb.ActorInfo) {
	w := a.where
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case p.State == pb.ActorState_ACTOR_DEAD:
		w.address, w.deathCause = "", p.DeathCause
	case p.State == pb.ActorState_ACTOR_ALIVE && (p.NumRestarts > w.numRestarts || w.address == ""):
		w.address, w.numRestarts = p.Address, p.NumRestarts
	}
}

// watch follows the actor's restarts for the handle (as Ray's callers subscribe to
// their actors), so calls made after a restart go to the new worker instead of
// failing on the old one. It ends with the client or with the actor's death.
func (a *Actor) watch() {
	backoff := rpcutil.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for a.c.tasks.ctx.Err() == nil {
		a.where.mu.Lock()
		next := a.where.numRestarts + 1
		a.where.mu.Unlock()
		reply, err := a.c.actors.GetActorInfo(a.c.tasks.ctx, &pb.GetActorInfoRequest{ActorId: a.ID, WaitAlive: true, MinNumRestarts: next})
		if err != nil {
			select {
			case <-a.c.tasks.ctx.Done():
			case <-time.After(backoff.Next()):
			}
			continue
		}
		backoff.Reset()
		a.learn(reply.Actor)
		if reply.Actor.State == pb.ActorState_ACTOR_DEAD {
			return
		}
	}
}
