// Package gcs is the global control store: the gRPC server that owns the cluster's
// tables (nodes, jobs, the internal key-value store, placement groups, actors and the
// worker executables, deleted once unused: executables_gc.go), keeps them in a
// store.Store (memory or Redis), watches node liveness through memberlist, fences raylets
// with an epoch that grows with every GCS start, and starts actors through the raylets'
// worker leases.
//
// Each table has a manager. Managers never hold a pointer to one another: they read the
// others through narrow interfaces and subscribe to their events (events.go); Start wires
// them. A manager is split by role: its service (the RPC handlers), its scheduler (the
// queue, backoff, the view handed to the pure placement core, the attempt) and its commit.
// For placement groups: placement_groups.go, pg_scheduler.go, pg_commit.go (the two-phase
// reservation on the raylets behind BundleReserver: bundle_reserver.go, with the in-memory
// reservertest beside it) and pg_lifecycle.go (nodes, jobs and GCS restarts). For actors:
// actors.go (the table, its entries, loading and pruning), actor_service.go (the
// ActorInfoService handlers, ChooseLeaseTargets among them), actor_scheduler.go (the loop,
// the queue, backoff, the node view handed to placement.ChooseNodes) and actor_commit.go
// (leasing a worker, running the constructor, restarts, deaths, worker kills). With
// queues, admission (pg_admission.go for groups, lease_admission.go for actors and task
// leases outside groups) charges work to its queue in one ledger. The
// autoscaler's AutoscalerStateService (autoscaler_state.go) reads the node, group and actor
// tables through the same kind of narrow interfaces (autoscaler_demand.go), keeps the
// request_resources constraint and the autoscaler's last report, tracks how long each node
// has been idle and drains nodes before termination. What the
// managers share about rows is in rows.go; the clock is Config.Now. Who may call what:
// auth_tokens.go keeps the scoped tokens (raygo auth) and verifies every call's token;
// tenancy.go is the one table of which scope may call each method and the one
// interceptor that keeps a tenant token to its own groups, actors and jobs, on gRPC and
// on the dashboard. Domain code returns
// plain errors (errors.go); statusOf maps them to gRPC codes at the boundary.
package gcs
