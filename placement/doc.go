// Package placement is raygo's pure scheduling core for placement groups: a cluster
// snapshot and a request go in, a plan (bundle → node) or a typed failure comes out.
//
// It owns:
//   - fixed-point resources (Amount, ResourceSet), exact as Ray's FixedPoint;
//   - request validation with Ray's rules (ParseRequest, Request.Validate), with errors
//     that name the field and become gRPC InvalidArgument messages;
//   - label selectors in Ray's forms (ParseLabelSelector: "a", "in(a,b)", "!a", "!in(a,b)");
//   - the snapshot (NewSnapshot, Reserve, Release) and the decision (Schedule) for the
//     PACK, SPREAD, STRICT_PACK and STRICT_SPREAD strategies, new groups and the
//     rescheduling of lost bundles;
//   - the failure taxonomy: Infeasible (only other nodes would help) vs NotNow (freed
//     capacity would), with a Reason per rejected node for `raygo status` and the
//     autoscaler.
//
// It does no I/O, reads no clock, starts no goroutines and imports nothing from gcs,
// raylet, sdk, autoscaler or cmd: the GCS takes the snapshot, calls Schedule, and runs
// the two-phase commit with the raylets. Decisions are deterministic (ties go to the
// lower node id), so one can be replayed from the logged snapshot and request.
//
// How a decision is made (schedule.go, filters.go, scoring.go, strategies.go): the
// request becomes dense demand vectors over the resources it names; bundles are ordered
// scarcest resource first (GPU bundles first, largest first); feasibility stages run
// cheapest first (status, group rule, label selector, resources) and a scorer picks the
// best-fitting node among those left. Topology (GPU indices, NVLink islands, rails) is
// meant to come in as one more feasibility stage and scorer, and as fields of
// BundlePlacement.
//
// The subpackage placementsim holds a simulated cluster and seeded request streams for
// property tests and the decision-latency benchmark.
package placement
