// Package raylet is the per-node agent: it registers its node with the GCS, keeps the
// registration alive (reconnecting with backoff across GCS restarts), gossips through
// memberlist so the GCS learns of its death, reports its resources and labels, and
// serves the NodeManagerService that the GCS calls with its epoch for fencing
// (raylet.go; the handlers in service.go).
//
// Placement-group bundles are prepared, committed and released in the bundle ledger
// (bundles.go), MIG slices carved for them in mig.go.
//
// It also runs the node's worker pool (Ray's): worker leases take resources from the
// node or from a committed placement-group bundle (leases.go), worker processes are
// started for them or reused (workers.go) and run executables fetched from the GCS by
// hash and cached on disk until unused for ExecutableCacheTTL (executables.go,
// executables_gcs.go), and each worker is watched until it exits (worker_exits.go).
//
// Its /metrics (metrics.go) shows its resources, bundles and GPU allocation, and the
// GPUs' activity sampled in the background with DCGM's names, with the GPUs bundles hold
// that stay idle (gpu_activity.go).
//
// Errors: the bundle ledger, the leases, the worker pool and the executable cache return
// plain Go errors wrapping the sentinels of errors.go; the NodeManagerService handlers
// (service.go) turn them into gRPC status codes in one function, nodeManagerStatus.
package raylet
