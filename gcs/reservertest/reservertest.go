// Package reservertest is an in-memory raylet side of the GCS's two-phase reservation
// (gcs.BundleReserver), for unit tests of the placement-group manager: Fake holds bundles
// per node with the raylet's generation rules, records every call and fails calls on
// demand; each GCS incarnation talks to it through a Caller, whose calls can be held and
// which stops as a killed process would. It checks nothing the GCS should have checked:
// the tests do.
package reservertest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Step names one kind of call.
type Step string

// The calls of gcs.BundleReserver.
const (
	Prepare       Step = "prepare"
	Commit        Step = "commit"
	Cancel        Step = "cancel"
	ReleaseUnused Step = "release-unused"
)

// ErrNodeDown is what every call to a node marked down returns.
var ErrNodeDown = errors.New("reservertest: node down")

// Bundle is one bundle a node holds.
type Bundle struct {
	PlacementGroupID string
	Index            int32
	Generation       int64
	Committed        bool
}

func (b Bundle) String() string {
	state := "prepared"
	if b.Committed {
		state = "committed"
	}
	return fmt.Sprintf("%s[%d]@%d %s", b.PlacementGroupID, b.Index, b.Generation, state)
}

// Call is one recorded call.
type Call struct {
	Step   Step
	NodeID string
	Keys   []*pb.BundleKey
}

type bundleID struct {
	pg    string
	index int32
}

// Fake is the in-memory raylets. Safe for concurrent use, as gcs.BundleReserver asks.
type Fake struct {
	mu     sync.Mutex
	held   map[string]map[bundleID]*Bundle // node → bundles
	down   map[string]bool
	fail   map[Step]map[string]error // step → node → error ("" node: every node)
	calls  []Call
	nextID int
}

// New returns raylets that hold nothing and accept every call.
func New() *Fake {
	return &Fake{held: map[string]map[bundleID]*Bundle{}, down: map[string]bool{}, fail: map[Step]map[string]error{}}
}

// ErrCallerGone is what every call of a Caller returns once it was stopped.
var ErrCallerGone = errors.New("reservertest: the caller is gone")

// Caller is one GCS incarnation's connection to the raylets: a gcs.BundleReserver
// whose calls can be held, and which can be stopped as a killed process stops.
// Safe for concurrent use.
type Caller struct {
	f     *Fake
	mu    sync.Mutex
	holds map[Step]chan error // step → closed or fed when released
	gone  bool
}

// Caller returns a new connection to the raylets.
func (f *Fake) Caller() *Caller { return &Caller{f: f, holds: map[Step]chan error{}} }

// Stop makes every call of this caller, waiting or new, return ErrCallerGone without
// reaching the raylets: the process that made them was killed.
func (c *Caller) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	for step, ch := range c.holds {
		close(ch)
		delete(c.holds, step)
	}
}

// FailOn makes every call of step to nodeID ("" for every node) return err, until
// FailOn is called again with a nil err.
func (f *Fake) FailOn(step Step, nodeID string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[step] == nil {
		f.fail[step] = map[string]error{}
	}
	if err == nil {
		delete(f.fail[step], nodeID)
		return
	}
	f.fail[step][nodeID] = err
}

// SetDown marks a node down (every call fails with ErrNodeDown, and what it held is
// gone) or back up (holding nothing).
func (f *Fake) SetDown(nodeID string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[nodeID] = down
	delete(f.held, nodeID)
}

// Hold makes this caller's calls of step wait (before they change anything) until
// release is called: with nil they then go ahead, with an error they return it. Calls
// waiting when their ctx ends return its error.
func (c *Caller) Hold(step Step) (release func(err error)) {
	ch := make(chan error)
	c.mu.Lock()
	c.holds[step] = ch
	c.mu.Unlock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			c.mu.Lock()
			if c.holds[step] != ch {
				c.mu.Unlock()
				return // stopped meanwhile
			}
			delete(c.holds, step)
			c.mu.Unlock()
			if err == nil {
				close(ch)
				return
			}
			go func() {
				for {
					ch <- err // every waiter gets it
				}
			}()
		})
	}
}

// Calls returns every call made so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Held lists the bundles a node holds, sorted.
func (f *Fake) Held(nodeID string) []Bundle {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Bundle
	for _, b := range f.held[nodeID] {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PlacementGroupID != out[j].PlacementGroupID {
			return out[i].PlacementGroupID < out[j].PlacementGroupID
		}
		return out[i].Index < out[j].Index
	})
	return out
}

// HeldAnywhere lists every bundle held, by node.
func (f *Fake) HeldAnywhere() map[string][]Bundle {
	f.mu.Lock()
	nodes := make([]string, 0, len(f.held))
	for node := range f.held {
		nodes = append(nodes, node)
	}
	f.mu.Unlock()
	out := map[string][]Bundle{}
	for _, node := range nodes {
		if held := f.Held(node); len(held) > 0 {
			out[node] = held
		}
	}
	return out
}

// Plant makes a node hold a prepared bundle nobody asked for (an orphan of an earlier GCS).
func (f *Fake) Plant(nodeID string, key *pb.BundleKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodeLocked(nodeID)[bundleID{key.PlacementGroupId, key.BundleIndex}] = &Bundle{PlacementGroupID: key.PlacementGroupId, Index: key.BundleIndex, Generation: key.Generation}
}

func (f *Fake) nodeLocked(nodeID string) map[bundleID]*Bundle {
	if f.held[nodeID] == nil {
		f.held[nodeID] = map[bundleID]*Bundle{}
	}
	return f.held[nodeID]
}

// enter waits while the step is held and returns ErrCallerGone once the caller stopped.
func (c *Caller) enter(ctx context.Context, step Step) error {
	c.mu.Lock()
	hold, gone := c.holds[step], c.gone
	c.mu.Unlock()
	if gone {
		return ErrCallerGone
	}
	if hold != nil {
		select {
		case err, open := <-hold:
			if open {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return ErrCallerGone
	}
	return nil
}

// Prepare implements gcs.BundleReserver through this caller.
func (c *Caller) Prepare(ctx context.Context, nodeID string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
	if err := c.enter(ctx, Prepare); err != nil {
		return nil, nil, err
	}
	return c.f.Prepare(ctx, nodeID, bundles)
}

// Commit implements gcs.BundleReserver through this caller.
func (c *Caller) Commit(ctx context.Context, nodeID string, keys []*pb.BundleKey) (*pb.ResourceReport, error) {
	if err := c.enter(ctx, Commit); err != nil {
		return nil, err
	}
	return c.f.Commit(ctx, nodeID, keys)
}

// Cancel implements gcs.BundleReserver through this caller.
func (c *Caller) Cancel(ctx context.Context, nodeID string, keys []*pb.BundleKey) (*pb.ResourceReport, error) {
	if err := c.enter(ctx, Cancel); err != nil {
		return nil, err
	}
	return c.f.Cancel(ctx, nodeID, keys)
}

// ReleaseUnused implements gcs.BundleReserver through this caller.
func (c *Caller) ReleaseUnused(ctx context.Context, nodeID string, inUse []*pb.BundleKey) (*pb.ReleaseUnusedBundlesReply, error) {
	if err := c.enter(ctx, ReleaseUnused); err != nil {
		return nil, err
	}
	return c.f.ReleaseUnused(ctx, nodeID, inUse)
}

// enter records a call and returns the injected failure, if any.
func (f *Fake) enter(step Step, nodeID string, keys []*pb.BundleKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Call{Step: step, NodeID: nodeID, Keys: keys})
	if f.down[nodeID] {
		return fmt.Errorf("%w: %s", ErrNodeDown, nodeID)
	}
	if err := f.fail[step][nodeID]; err != nil {
		return err
	}
	return f.fail[step][""]
}

func keysOf(bundles []*pb.BundleReservation) []*pb.BundleKey {
	keys := make([]*pb.BundleKey, len(bundles))
	for i, b := range bundles {
		keys[i] = b.Key
	}
	return keys
}

// Prepare holds every bundle prepared (again, at the same generation, is a no-op) or
// refuses them all: a generation older than the one held is refused, as the raylet does.
func (f *Fake) Prepare(ctx context.Context, nodeID string, bundles []*pb.BundleReservation) ([]*pb.BundleReservation, *pb.ResourceReport, error) {
	if err := f.enter(Prepare, nodeID, keysOf(bundles)); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.nodeLocked(nodeID)
	for _, b := range bundles {
		if old := held[bundleID{b.Key.PlacementGroupId, b.Key.BundleIndex}]; old != nil && old.Generation > b.Key.Generation {
			return nil, nil, fmt.Errorf("bundle %s[%d]: generation %d is older than %d", b.Key.PlacementGroupId, b.Key.BundleIndex, b.Key.Generation, old.Generation)
		}
	}
	out := make([]*pb.BundleReservation, len(bundles))
	for i, b := range bundles {
		id := bundleID{b.Key.PlacementGroupId, b.Key.BundleIndex}
		if old := held[id]; old == nil || old.Generation < b.Key.Generation {
			held[id] = &Bundle{PlacementGroupID: id.pg, Index: id.index, Generation: b.Key.Generation}
		}
		out[i] = &pb.BundleReservation{Key: b.Key, Resources: b.Resources, GpuIds: b.GpuIds, Mig: b.Mig}
		if b.Mig != nil {
			f.nextID++
			out[i].DeviceUuids = []string{fmt.Sprintf("MIG-fake-%d", f.nextID)}
		}
	}
	return out, &pb.ResourceReport{}, nil
}

// Commit commits prepared bundles; one not prepared at that generation fails the call.
func (f *Fake) Commit(ctx context.Context, nodeID string, keys []*pb.BundleKey) (*pb.ResourceReport, error) {
	if err := f.enter(Commit, nodeID, keys); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.nodeLocked(nodeID)
	for _, k := range keys {
		if b := held[bundleID{k.PlacementGroupId, k.BundleIndex}]; b == nil || b.Generation != k.Generation {
			return nil, fmt.Errorf("bundle %s[%d] generation %d: not prepared on %s", k.PlacementGroupId, k.BundleIndex, k.Generation, nodeID)
		}
	}
	for _, k := range keys {
		held[bundleID{k.PlacementGroupId, k.BundleIndex}].Committed = true
	}
	return &pb.ResourceReport{}, nil
}

// Cancel releases the bundles held at the key's generation or older.
func (f *Fake) Cancel(ctx context.Context, nodeID string, keys []*pb.BundleKey) (*pb.ResourceReport, error) {
	if err := f.enter(Cancel, nodeID, keys); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.nodeLocked(nodeID)
	for _, k := range keys {
		id := bundleID{k.PlacementGroupId, k.BundleIndex}
		if b := held[id]; b != nil && b.Generation <= k.Generation {
			delete(held, id)
		}
	}
	return &pb.ResourceReport{}, nil
}

// ReleaseUnused releases every bundle of the node not named (at its generation) in inUse.
func (f *Fake) ReleaseUnused(ctx context.Context, nodeID string, inUse []*pb.BundleKey) (*pb.ReleaseUnusedBundlesReply, error) {
	if err := f.enter(ReleaseUnused, nodeID, inUse); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := map[bundleID]int64{}
	for _, k := range inUse {
		keep[bundleID{k.PlacementGroupId, k.BundleIndex}] = k.Generation
	}
	reply := &pb.ReleaseUnusedBundlesReply{Resources: &pb.ResourceReport{}}
	for id, b := range f.nodeLocked(nodeID) {
		key := &pb.BundleReservation{Key: &pb.BundleKey{PlacementGroupId: id.pg, BundleIndex: id.index, Generation: b.Generation}}
		if generation, ok := keep[id]; ok && generation == b.Generation {
			reply.Held = append(reply.Held, key)
			continue
		}
		delete(f.held[nodeID], id)
		reply.Released = append(reply.Released, key)
	}
	return reply, nil
}
