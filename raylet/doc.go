// Package raylet is the per-node agent: it registers its node with the GCS, keeps the
// registration alive (reconnecting with backoff across GCS restarts), gossips through
// memberlist so the GCS learns of its death, reports its resources and labels, and
// serves the NodeManagerService that the GCS calls with its epoch for fencing.
package raylet
