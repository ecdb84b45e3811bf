// Package clusterconfig reads the autoscaler's cluster configuration: Ray's cluster YAML
// (the file `ray up` takes, Ray 2.60's ray-schema.json), so one file serves both. It
// fills the keys left out with Ray's defaults, rejects keys Ray's schema does not know
// (with their field path), validates the values raygo acts on with the shared resource
// and label rules, lists the keys raygo accepts but ignores, and reads raygo's own
// settings, which live under provider.raygo so that Ray accepts the file too. The
// result gives the planner its node types (autoscaler.NodeType), GPU topology included,
// and the cluster-level settings.
//
// The one I/O is Load's file read.
package clusterconfig
