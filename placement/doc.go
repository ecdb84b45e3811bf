// Package placement is raygo's pure scheduling core for placement groups: a cluster
// snapshot and a request go in, a plan (bundle → node) or a typed failure comes out.
// It also chooses nodes for single-shape work (ChooseNodes, single.go): actors and the
// tasks of one scheduling key, with Ray's DEFAULT (hybrid), SPREAD, NODE_AFFINITY and
// PLACEMENT_GROUP strategies, an ordered list of nodes or a typed outcome with reasons.
//
// It owns decisions only. The vocabulary it decides over is shared with every other part
// and lives in leaf packages: resource amounts, sets and their validation in
// internal/resources, MIG models and profile tables in internal/mig, label keys and
// selectors in internal/nodelabel, field errors in internal/fielderr.
//
// It owns:
//   - placement-group request validation with Ray's rules (ParseRequest,
//     Request.Validate), built on the vocabulary's checks, with errors that name the
//     field and become gRPC InvalidArgument messages;
//   - the snapshot (NewSnapshot, Reserve, Release) and the decision (Schedule) for the
//     PACK, SPREAD, STRICT_PACK and STRICT_SPREAD strategies, new groups and the
//     rescheduling of lost bundles, by resources and by GPU topology (NVLink islands,
//     rails, scalable units), with the GPUs each bundle gets;
//   - the fabric cost model (EstimateAllReduce);
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
// cheapest first (status, group rule, label selector, resources, GPUs) and a scorer
// picks the best-fitting node among those left.
//
// GPU topology (topology.go, gpus.go, islands.go, spread.go, fabric.go). A node may
// list its GPUs (Node.GPUs: index, UUID, NVLink island, rail, free share) and a
// multi-node NVLink domain (Node.NVLinkDomain); nodelabel.ScalableUnit places it in the
// fabric. Where it does:
//   - every GPU bundle gets concrete GPUs (BundlePlacement.GPUIndices): whole GPUs to
//     itself, a fraction on one shared GPU; Reserve and Release account each GPU;
//   - STRICT_PACK keeps every whole GPU of the group in one NVLink island (one node's,
//     or one multi-node domain's); PACK tries one island first, then the fewest islands;
//   - SPREAD and STRICT_SPREAD choose the fewest scalable units and the same rails on
//     every node;
//   - a group with Request.Topology "node" asks for neither: each strategy keeps Ray's
//     node-level meaning (its bundles still get concrete GPUs);
//   - every choice prefers the island with the fewest free GPUs that fits, so the
//     largest free islands stay whole.
//
// Nodes that do not list GPUs are scheduled by GPU count, as before topology.
//
// MIG (mig_allocator.go, mig_schedule.go; the tables are internal/mig's). A node may list its GPUs in MIG mode
// with their slot maps (Node.MIGGPUs); they are not whole GPUs. A bundle asking for a
// MIG profile ({"nvidia.com/mig-1g.10gb": 1}) fits a node when PlanMIG finds it a
// place on the node's MIG GPUs, with the group's other MIG bundles already there; it
// gets the step (BundlePlacement.MIG: reuse an idle instance, or carve at a GPU and
// start, destroying idle instances first if needed) and the parent GPU in GPUIndices.
// MIG bundles follow the group's strategy; a STRICT_PACK group of MIG bundles is kept
// on one node (slices are never NVLink peers). Reserve applies the steps to the slot
// maps and Release returns the instances to the idle pool.
// EstimateAllReduce is a fabric cost model: the all-reduce bus bandwidth a placement
// would get.
//
// Fragmentation (fragmentation.go, fragmentation_score.go). NodeFragmentation is FGD's
// measure: the expected number of a node's free GPUs that a task drawn from a workload
// distribution (WorkloadDistribution; learned with WorkloadHistogram) could not use,
// with the per-shape counts. With Request.Workload set, a scoring stage ranks feasible
// nodes by how much their fragmentation would grow. ClusterFragmentation gives the head's
// figures: per gang size k, the free GPUs no k-GPU gang in one NVLink island can use (Σ over
// islands of free GPUs mod k, raygo_gpus_free_unschedulable), and FGD's expectation.
//
// The subpackage placementsim holds a simulated cluster, machine models (DGX H100, PCIe
// NVLink pairs, GB200 NVL72 trays) and seeded request streams for property tests, the
// decision-latency benchmark and the topology benchmark; tracereplay replays the
// Alibaba GPU trace through raygo's placement and the FGD paper's policies.
package placement
