package gcs

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/raygo-dev/raygo/placement"
)

// The pending queue groups waiting placement groups by shape: groups with the same
// strategy, topology, bundles and selectors get the same answer from the scheduler on
// the same cluster, so one failed attempt parks the whole shape until the cluster
// changes in a way that could let it fit (a node joins or changes, resources are freed
// on a node whose free resources could hold one of its bundles), as Kubernetes' scheduler
// keeps unschedulable pods aside and Kueue parks inadmissible workloads. A parked shape
// costs nothing per round. Groups that failed for another reason (a raylet refused the
// prepare) wait out a backoff outside the shapes and then rejoin theirs.

// shape is one queue of identical pending groups. Guarded by pgManager.mu.
type shape struct {
	key string
	// request is the shape's scheduling request (PlacedBundles empty); the wake test
	// reads it.
	request placement.Request
	// entries are the shape's groups in queue order.
	entries []*pgEntry
	// parked: the last attempt failed and nothing that could help has happened since.
	parked bool
	// hasMIG: some bundle asks for a MIG profile (any MIG report may help it).
	hasMIG bool
	// unitResources are the first group's bundle maps, shared by the others.
	unitResources []map[string]float64
}

// pendingQueue holds every group waiting to be tried. Guarded by pgManager.mu.
type pendingQueue struct {
	shapes map[string]*shape
	// backoff holds groups waiting out a retry delay, by id.
	backoff map[string]*pgEntry
}

func newPendingQueue() pendingQueue {
	return pendingQueue{shapes: map[string]*shape{}, backoff: map[string]*pgEntry{}}
}

// shapeKey names a group's shape. A group that still holds some bundles (RESCHEDULING)
// is a shape of its own: where its other bundles are changes its answer.
func shapeKey(e *pgEntry) string {
	if e.rescheduling() {
		return "group:" + e.info.PlacementGroupId
	}
	return e.shapeKey
}

// requestShapeKey is the canonical text of a request's strategy, topology, bundles and
// selectors.
func requestShapeKey(r placement.Request) string {
	var b strings.Builder
	b.WriteString(string(r.Strategy))
	b.WriteByte('|')
	b.WriteString(string(r.Topology))
	for i, bundle := range r.Bundles {
		b.WriteString("|{")
		for _, name := range bundle.Names() {
			b.WriteString(strconv.Quote(name))
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(int64(bundle[name]), 10))
			b.WriteByte(',')
		}
		b.WriteByte('}')
		if i < len(r.BundleLabelSelectors) {
			b.WriteString(r.BundleLabelSelectors[i].String())
		}
	}
	return b.String()
}

// add queues a group (PENDING or RESCHEDULING, nothing in flight) unparked in its shape:
// a new arrival is tried at once, its shape's older groups first.
func (q *pendingQueue) add(e *pgEntry) {
	key := shapeKey(e)
	s := q.shapes[key]
	if s == nil {
		request := e.request
		request.PlacedBundles = nil
		s = &shape{key: key, request: request}
		for _, bundle := range request.Bundles {
			s.hasMIG = s.hasMIG || hasMIGResource(bundle)
		}
		for _, b := range e.info.Bundles {
			s.unitResources = append(s.unitResources, b.UnitResources)
		}
		q.shapes[key] = s
	} else if !e.rescheduling() {
		// Identical groups share their bundles' maps, which nothing changes: with
		// thousands of groups waiting, the copies would be most of their memory.
		e.request.Bundles, e.shapeKey = s.request.Bundles, s.key
		for i, b := range e.info.Bundles {
			b.UnitResources = s.unitResources[i]
		}
	}
	// Keep queue order: groups rescheduling lost bundles first, then arrival order.
	at := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].seq > e.seq })
	s.entries = append(s.entries, nil)
	copy(s.entries[at+1:], s.entries[at:])
	s.entries[at] = e
	s.parked = false
	e.queued = s
}

// addAfterBackoff queues a group whose attempt failed for a reason other than capacity:
// it rejoins its shape once e.retry is due.
func (q *pendingQueue) addAfterBackoff(e *pgEntry) {
	q.backoff[e.info.PlacementGroupId] = e
}

// drop takes a group out of the queue (placed, being placed or removed).
func (q *pendingQueue) drop(e *pgEntry) {
	delete(q.backoff, e.info.PlacementGroupId)
	s := e.queued
	if s == nil {
		return
	}
	e.queued = nil
	for i, x := range s.entries {
		if x == e {
			s.entries = append(s.entries[:i], s.entries[i+1:]...)
			break
		}
	}
	if len(s.entries) == 0 {
		delete(q.shapes, s.key)
	}
}

// due moves the groups whose backoff ended into their shapes and returns how long until
// the next one ends (max when none waits).
func (q *pendingQueue) due(now time.Time, max time.Duration) time.Duration {
	next := max
	for id, e := range q.backoff {
		if wait := e.retry.next.Sub(now); wait > 0 {
			next = min(next, wait)
			continue
		}
		delete(q.backoff, id)
		q.add(e)
	}
	return next
}

// ready returns the unparked shapes in queue order: shapes rescheduling lost bundles
// first, then by their first group's arrival.
func (q *pendingQueue) ready() []*shape {
	var out []*shape
	for _, s := range q.shapes {
		if !s.parked && len(s.entries) > 0 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].entries[0], out[j].entries[0]
		ra, rb := a.rescheduling(), b.rescheduling()
		if ra != rb {
			return ra
		}
		return a.seq < b.seq
	})
	return out
}

// wakeAll unparks every shape (a flush, or a change the queue cannot judge).
func (q *pendingQueue) wakeAll() {
	for _, s := range q.shapes {
		s.parked = false
	}
}

// wakeFor unparks the shapes a node could now help: one of their bundles matches the
// node's labels and fits what it has free (a group rescheduling onto the node its other
// bundles hold is always woken by that node). MIG shapes wake on any change to a node
// with MIG GPUs. It returns how many shapes it woke.
func (q *pendingQueue) wakeFor(node placement.Node) int {
	woken := 0
	for _, s := range q.shapes {
		if s.parked && shapeCouldUse(s, node) {
			s.parked = false
			woken++
		}
	}
	return woken
}

// shapeCouldUse reports whether a node, as it is now, could hold some bundle of the shape.
func shapeCouldUse(s *shape, node placement.Node) bool {
	if !node.Alive || node.Draining {
		return false
	}
	if s.hasMIG && len(node.MIGGPUs) > 0 {
		return true
	}
	for i, bundle := range s.request.Bundles {
		if i < len(s.request.BundleLabelSelectors) && !s.request.BundleLabelSelectors[i].Matches(node.Labels) {
			continue
		}
		if bundle.IsSubsetOf(node.Available) {
			return true
		}
	}
	return false
}
