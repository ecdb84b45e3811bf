package gcs

import (
	"sync"
	"time"

	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// cancelRideWait is how long a removed group's cancel waits for a prepare-and-commit to
// its node to ride on (one raylet call fewer: a driver making and removing one group at
// a time removes a group just before it places the next, most often on the same node)
// before it is sent on its own. It waits only when nothing waits for capacity.
const cancelRideWait = 2 * time.Millisecond

// cancelRide is a removed group's bundles on one node, to be cancelled.
type cancelRide struct {
	e       *pgEntry
	node    string
	bundles []*pb.BundleReservation
}

// cancelRides holds the cancels waiting for a ride, by node. Its mu is taken alone.
type cancelRides struct {
	mu     sync.Mutex
	byNode map[string]*nodeRides
	// wait, when set, replaces cancelRideWait: a test that checks a cancel rides sets it
	// longer, since a loaded machine can take more than cancelRideWait between a
	// removal and the create that follows it.
	wait time.Duration
}

// nodeRides are the cancels waiting for a ride to one node, and the timer that sends
// them on their own.
type nodeRides struct {
	rides []cancelRide
	timer *time.Timer
}

// rideCancel queues a removed group's cancel (its bundles all on one node) for the next
// prepare-and-commit to that node, and sends it on its own after cancelRideWait if none
// takes it. The group stays cancelling, its bundles held in the view, until the raylet
// confirms.
func (m *pgManager) rideCancel(r cancelRide) {
	m.rides.mu.Lock()
	defer m.rides.mu.Unlock()
	if m.rides.byNode == nil {
		m.rides.byNode = map[string]*nodeRides{}
	}
	waiting := m.rides.byNode[r.node]
	if waiting == nil {
		wait := m.rides.wait
		if wait == 0 {
			wait = cancelRideWait
		}
		waiting = &nodeRides{}
		waiting.timer = time.AfterFunc(wait, func() { m.cancelNow(m.takeRides(r.node, waiting)) })
		m.rides.byNode[r.node] = waiting
	}
	waiting.rides = append(waiting.rides, r)
}

// takeRides removes and returns the cancels waiting for a ride to node (only those of
// batch, when given: a timer takes its own batch, never a later one).
func (m *pgManager) takeRides(node string, batch *nodeRides) []cancelRide {
	m.rides.mu.Lock()
	defer m.rides.mu.Unlock()
	waiting := m.rides.byNode[node]
	if waiting == nil || batch != nil && waiting != batch {
		return nil
	}
	delete(m.rides.byNode, node)
	waiting.timer.Stop()
	return waiting.rides
}

// flushRides sends every cancel waiting for a ride on its own, now (something waits for
// the capacity they hold).
func (m *pgManager) flushRides() {
	m.rides.mu.Lock()
	nodes := make([]string, 0, len(m.rides.byNode))
	for node := range m.rides.byNode {
		nodes = append(nodes, node)
	}
	m.rides.mu.Unlock()
	for _, node := range nodes {
		if rides := m.takeRides(node, nil); len(rides) > 0 {
			go m.cancelNow(rides)
		}
	}
}

// rideKeys are the keys of the bundles the rides cancel.
func rideKeys(rides []cancelRide) []*pb.BundleKey {
	var keys []*pb.BundleKey
	for _, r := range rides {
		keys = append(keys, keysOf(r.bundles)...)
	}
	return keys
}

// cancelNow cancels the rides' bundles in calls of their own, then counts them released
// (a group on several nodes once every node confirmed: pass all its rides at once), as
// afterConfirmed does: a cancel the raylet did not confirm is sent again in the
// background, and the bundles stay held in the view meanwhile.
func (m *pgManager) cancelNow(rides []cancelRide) {
	if len(rides) == 0 {
		return
	}
	byNode := map[string][]*pb.BundleReservation{}
	for _, r := range rides {
		byNode[r.node] = append(byNode[r.node], r.bundles...)
	}
	m.afterConfirmed(m.cancelAll(byNode), "a removed group's bundles", func() { m.cancelled(rides) })
}

// retryCancels sends the cancels the raylets did not confirm again, with backoff, until
// every node confirmed or is no longer ALIVE (a dead node holds nothing). It reports
// false if the GCS stopped first. what names the bundles in the warning.
func (m *pgManager) retryCancels(what string, unconfirmed map[string][]*pb.BundleReservation) bool {
	backoff := rpcutil.Backoff{Min: retryBackoffMin, Max: retryBackoffMax}
	for warned := false; ; warned = true {
		alive := map[string]bool{}
		for _, n := range m.nodes.schedulingNodes() {
			alive[n.NodeId] = true
		}
		for node := range unconfirmed {
			if !alive[node] {
				delete(unconfirmed, node)
			} else if !warned {
				m.log.Warn().Str("node_id", node).Int("bundles", len(unconfirmed[node])).
					Msgf("the raylet did not confirm the cancel of %s; retrying until it does or the node is gone", what)
			}
		}
		if len(unconfirmed) == 0 {
			return true
		}
		select {
		case <-m.stopped:
			return false
		case <-time.After(backoff.Next()):
		}
		unconfirmed = m.cancelAll(unconfirmed)
	}
}

// cancelled records that the raylets confirmed the rides' cancels: the groups' bundles
// are released in the view, and the loop runs if anything waits for them.
func (m *pgManager) cancelled(rides []cancelRide) {
	m.mu.Lock()
	for _, r := range rides {
		r.e.cancelling = false
		for _, b := range r.bundles {
			m.releasedLocked(r.e.id, int(b.Key.BundleIndex))
		}
	}
	waiting := m.waitingLocked()
	m.mu.Unlock()
	if waiting {
		m.kick()
	}
}
