// Package queues owns the multi-tenancy configuration: queues with per-resource quotas
// (Kueue's ClusterQueue), flat cohorts that lend unused quota, priority classes, and the
// mapping of a Ray namespace to its queue. Field names and defaults are Kueue's, so a
// Kueue user reads a config at sight; raygo's additions are named in each field's doc.
//
// Load parses and validates a whole file (bytes in, *Config or a *fielderr.Error naming
// the field out). The package is pure: no I/O, no clock.
package queues
