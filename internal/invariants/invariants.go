// Package invariants checks the invariants of DESIGN.md on one view of a cluster: the
// GCS's placement-group table beside what every raylet holds. It is pure: the caller
// (`raygo debug check-invariants`, the chaos and lifecycle tests) reads the view.
//
// The checks hold on a settled cluster. While a group is being placed, removed or
// rescheduled, a view taken at one instant may show a prepared bundle the table does not
// name yet, or a cancel that has not reached its raylet; callers take the view again
// before they call such a violation real (Settled).
package invariants

import (
	"fmt"
	"sort"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Kind names which invariant a violation breaks.
type Kind string

// The invariants.
const (
	// PartialGang: a CREATED group has a bundle that is not placed, or that its node
	// holds only prepared.
	PartialGang Kind = "partial_gang"
	// DoubleAllocation: a bundle is held on two nodes, or a node holds more than its
	// totals.
	DoubleAllocation Kind = "double_allocation"
	// Leak: a node holds a bundle that no live group has there.
	Leak Kind = "leak"
	// Lost: the table places a bundle on a live node that does not hold it.
	Lost Kind = "lost"
	// QuotaOverrun: the groups a queue holds take more than its nominal quota plus its
	// borrowing limit, or a cohort's queues together more than their nominal quotas.
	QuotaOverrun Kind = "quota_overrun"
)

// Violation is one broken invariant, with the objects it concerns.
type Violation struct {
	Kind   Kind
	Detail string
}

func (v Violation) String() string { return string(v.Kind) + ": " + v.Detail }

// Node is one raylet as the checker sees it.
type Node struct {
	ID string
	// Alive: the GCS lists the node ALIVE and the raylet answered.
	Alive bool
	// Total is the node's resources_total.
	Total map[string]float64
	// Bundles are the reservations the raylet reported (GetNodeStats).
	Bundles []*pb.BundleReservation
}

type bundleKey struct {
	group string
	index int32
}

func (k bundleKey) String() string { return fmt.Sprintf("%s[%d]", k.group, k.index) }

// Check returns every violation in the view, sorted.
func Check(groups []*pb.PlacementGroupInfo, nodes []Node) []Violation {
	var out []Violation
	add := func(kind Kind, format string, args ...any) {
		out = append(out, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	alive := map[string]bool{}
	for _, n := range nodes {
		alive[n.ID] = n.Alive
	}
	// placedOn: where the table puts each bundle of a live group.
	placedOn := map[bundleKey]string{}
	for _, g := range groups {
		if g.State == pb.PlacementGroupState_REMOVED {
			continue
		}
		for _, b := range g.Bundles {
			key := bundleKey{g.PlacementGroupId, b.BundleIndex}
			switch {
			case b.NodeId != "":
				placedOn[key] = b.NodeId
			case g.State == pb.PlacementGroupState_CREATED:
				add(PartialGang, "CREATED group %s: bundle %d is not placed", g.PlacementGroupId, b.BundleIndex)
			}
		}
	}
	// heldOn: where the raylets hold each bundle; committed: held committed.
	heldOn := map[bundleKey][]string{}
	committed := map[bundleKey]bool{}
	for _, n := range nodes {
		if !n.Alive {
			continue
		}
		used := resources.Set{}
		for _, b := range n.Bundles {
			key := bundleKey{b.GetKey().GetPlacementGroupId(), b.GetKey().GetBundleIndex()}
			heldOn[key] = append(heldOn[key], n.ID)
			if b.State == pb.BundleReservationState_BUNDLE_COMMITTED && placedOn[key] == n.ID {
				committed[key] = true
			}
			if placedOn[key] != n.ID {
				add(Leak, "node %s holds bundle %s (%s), which no live group has there", n.ID, key, strings.ToLower(strings.TrimPrefix(b.State.String(), "BUNDLE_")))
			}
			if set, err := resources.SetFromFloat(b.Resources); err == nil {
				if sum, err := resources.SumOf([]resources.Set{used, set}); err == nil {
					used = sum
				}
			}
		}
		total, err := resources.SetFromFloat(n.Total)
		if err != nil {
			continue
		}
		for _, name := range used.Names() {
			if used[name] > total[name] {
				add(DoubleAllocation, "node %s holds %s %s in bundles, its total is %s", n.ID, used[name], name, total[name])
			}
		}
	}
	for key, holders := range heldOn {
		if len(holders) > 1 {
			sort.Strings(holders)
			add(DoubleAllocation, "bundle %s is held on %s", key, strings.Join(holders, " and "))
		}
	}
	for _, g := range groups {
		if g.State != pb.PlacementGroupState_CREATED {
			continue
		}
		for _, b := range g.Bundles {
			key := bundleKey{g.PlacementGroupId, b.BundleIndex}
			if b.NodeId != "" && alive[b.NodeId] && len(heldOn[key]) > 0 && !committed[key] {
				add(PartialGang, "CREATED group %s: bundle %d is not held committed on %s", g.PlacementGroupId, b.BundleIndex, b.NodeId)
			}
		}
	}
	for key, node := range placedOn {
		if alive[node] && len(heldOn[key]) == 0 {
			add(Lost, "the table places bundle %s on %s, which does not hold it", key, node)
		}
	}
	sortViolations(out)
	return out
}

func sortViolations(out []Violation) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Detail < out[j].Detail
	})
}

// CheckQuotas returns the quota overruns of the groups and actors in the queues
// (ListQueues), sorted. A group holds its queue's quota from admission to removal: every
// group neither PENDING nor REMOVED is charged the sum of its bundles, as admission
// charges it. An actor outside groups holds its queue's quota while its row names the
// queue (from admission until it dies or loses its worker): its required resources.
// The usage it counts is the tables', not the GCS's ledger, so an overrun the ledger
// hides is found; task leases, which no table lists, are not counted. Resources a queue
// does not list are not limited. A queue whose quota was lowered below its usage
// (evicting nothing) is over quota too, and reported.
func CheckQuotas(groups []*pb.PlacementGroupInfo, actors []*pb.ActorInfo, queues []*pb.QueueStatus) []Violation {
	usage := map[string]resources.Set{}
	for _, a := range actors {
		if a.Queue == "" || a.State == pb.ActorState_ACTOR_DEAD || a.PlacementGroupId != "" {
			continue
		}
		if set, err := resources.SetFromFloat(a.RequiredResources); err == nil {
			usage[a.Queue] = usage[a.Queue].Add(set)
		}
	}
	for _, g := range groups {
		if g.Queue == "" || g.State == pb.PlacementGroupState_PENDING || g.State == pb.PlacementGroupState_REMOVED {
			continue
		}
		sets := []resources.Set{usage[g.Queue]}
		for _, b := range g.Bundles {
			if set, err := resources.SetFromFloat(b.UnitResources); err == nil {
				sets = append(sets, set)
			}
		}
		if sum, err := resources.SumOf(sets); err == nil {
			usage[g.Queue] = sum
		}
	}
	var out []Violation
	type cohortResource struct{ cohort, resource string }
	cohortUsage, cohortQuota := map[cohortResource]resources.Amount{}, map[cohortResource]resources.Amount{}
	for _, q := range queues {
		for _, r := range q.Resources {
			if !r.Limited {
				continue
			}
			used := usage[q.Queue][r.Resource]
			nominal, err := resources.AmountFromFloat(r.NominalQuota)
			if err != nil {
				continue
			}
			limit := nominal
			switch {
			case q.Cohort == "":
				// Nobody to borrow from.
			case r.BorrowingLimit < 0:
				limit = -1
			default:
				borrow, err := resources.AmountFromFloat(r.BorrowingLimit)
				if err != nil {
					continue
				}
				limit += borrow
			}
			if limit >= 0 && used > limit {
				out = append(out, Violation{Kind: QuotaOverrun, Detail: fmt.Sprintf("queue %s holds %s %s, its limit is %s (nominal %s)",
					q.Queue, used, r.Resource, limit, nominal)})
			}
			if q.Cohort != "" {
				key := cohortResource{q.Cohort, r.Resource}
				cohortUsage[key] += used
				cohortQuota[key] += nominal
			}
		}
	}
	for key, used := range cohortUsage {
		if used > cohortQuota[key] {
			out = append(out, Violation{Kind: QuotaOverrun, Detail: fmt.Sprintf("cohort %s holds %s %s, its queues' nominal quotas add up to %s",
				key.cohort, used, key.resource, cohortQuota[key])})
		}
	}
	sortViolations(out)
	return out
}

// Settled keeps the violations found in every one of several views taken one after
// another: what a change in flight explains goes away between two views, a real
// violation stays.
func Settled(views ...[]Violation) []Violation {
	if len(views) == 0 {
		return nil
	}
	count := map[Violation]int{}
	for _, view := range views {
		seen := map[Violation]bool{}
		for _, v := range view {
			if !seen[v] {
				seen[v] = true
				count[v]++
			}
		}
	}
	var out []Violation
	for _, v := range views[len(views)-1] {
		if count[v] == len(views) {
			out = append(out, v)
		}
	}
	return out
}
