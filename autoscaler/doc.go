// Package autoscaler owns scaling the cluster to its demand: a pure planner (pending
// placement-group demand and node types in, a launch/terminate plan out), the reconcile
// loop around it, and the cloud providers (local processes, AWS EC2). It talks to the GCS
// only over protos/. Its configuration, Ray's cluster YAML, is read by clusterconfig; the
// rest is not implemented yet: the autoscaler issue builds it on the INFEASIBLE groups
// and per-node reasons that the GCS already records.
package autoscaler
