// Package autoscaler owns scaling the cluster to its demand: a pure planner (pending
// placement-group demand and node types in, a launch/terminate plan out), the reconcile
// loop around it, and the cloud providers (local processes, AWS EC2). It talks to the GCS
// only over protos/ (the GCS's AutoscalerStateService). Its configuration, Ray's cluster
// YAML, is read by clusterconfig; the loop is reconciler; the providers are provider
// (the interface and an in-memory one), provider/fakemultinode (local raylet
// processes) and provider/aws (EC2 instances).
//
// The planner (plan.go, choose.go, classes.go, improve.go, constraint.go, scaledown.go) is Decide(Input) Plan:
// pure and deterministic (no I/O, clock or goroutines; the same input gives the same
// plan). Demand is the work admission let through that lacks capacity: pending
// placement groups (whole, with their strategy, NVLink-island rule and label selectors),
// tasks and actors by shape, and the last request_resources call, sized against node
// totals so running work counts toward it; work held by admission is not demand. Every
// fit is decided by the placement core (placement.Schedule on snapshots of running nodes'
// free capacity, launching nodes, and hypothetical nodes built from node types with
// NewNode), never by a rule of the planner's own. Demand is served most GPUs first. A
// gang goes on running nodes first, then launching and already planned nodes, then on
// new nodes of the type (or, when cheaper or needed, the mix of types) that holds it for
// the least cost (price, then priority, then fewer nodes, then name); CPU-only work never
// gets a GPU type launched for it while a CPU type could hold it. On small inputs a
// bounded local search then tries plans near the greedy one (improve.go), and the same
// is done from other starting points: every gang served before any task, the demand on
// nodes of one or two types, the nodes Ray's planners would choose, each the type the
// remaining demand uses best (utilization.go), the plan built node by node, and the
// nodes Ray's v2 planner would choose, gang by gang (utilization_v2.go); the cheapest
// placeable plan is kept. Large inputs (more than 256 groups and shapes, no
// selector on the node id, no multi-node NVLink domain) are planned by node classes
// (classes.go): launching and planned nodes in one state are counted, not listed, and
// the placement core is asked once per class state, not per node; a gang of unlike
// bundles is planned there one run of equal bundles after the other. MIG profiles are
// counted: a type holds the profiles its Resources list. min_workers, per-type and
// cluster max_workers,
// unavailable types and upscaling_speed (tasks and actors only) bound the launches;
// demand a limit stops is reported Limited, demand no type could ever hold is reported
// infeasible with a one-line reason and never launched for. Scale-down terminates nodes
// above max_workers, then, at most max_unavailable at once, idle nodes of unconfigured
// types and nodes idle past their type's timeout, never the head, a node of unknown type,
// a node below min_workers or a node the plan places demand on.
package autoscaler
