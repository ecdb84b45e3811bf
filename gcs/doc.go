// Package gcs is the global control store: the gRPC server that owns the cluster's
// tables (nodes, jobs, the internal key-value store, placement groups, actors and the
// worker executables, deleted once unused: executables_gc.go), keeps them in a store.Store (memory or Redis), watches node
// liveness through memberlist, fences raylets with an epoch that grows with every GCS
// start, and starts actors through the raylets' worker leases.
//
// The actor manager is four files: actors.go (the table, its entries, loading and
// pruning), actor_service.go (the ActorInfoService handlers, ChooseLeaseTargets among
// them), actor_scheduler.go (the loop, the queue, backoff, the node view handed to
// placement.ChooseNodes, the start of an attempt) and actor_commit.go (leasing a worker,
// running the constructor, restarts, deaths, worker kills).
package gcs
