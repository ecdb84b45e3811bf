// Package gcs is the global control store: the gRPC server that owns the cluster's
// tables (nodes, jobs, the internal key-value store, and later placement groups), keeps
// them in a store.Store (memory or Redis), watches node liveness through memberlist, and
// fences raylets with an epoch that grows with every GCS start.
package gcs
