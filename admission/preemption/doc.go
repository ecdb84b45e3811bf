// Package preemption chooses which running workloads to evict so that a pending one
// can start: Kueue's preemption rules (withinClusterQueue, reclaimWithinCohort,
// borrowWithinCohort with maxPriorityThreshold, Kueue's eviction reasons and candidate
// order) over raygo's GPU topology, with raygo's timing knobs (minRuntime, preemption
// delay, waiting for the autoscaler instead of evicting).
//
// Decide is pure and deterministic: the queue configuration, usage, the preemptor, the
// running workloads with where their bundles are, a placement snapshot and now go in;
// victims with their reasons, or a wait or a typed "cannot" with why, come out. Whether
// the preemptor fits is always placement.Schedule's answer on a copy of the snapshot
// with the victims' bundles released, and admission.QuotaView's for quota; the package
// has no fit rule of its own. It does no I/O, reads no clock and starts no goroutines:
// the GCS owns the clock and carries the decision out (notices, checkpoints, eviction).
//
// The victim set is minimal (no victim can be dropped) and, among minimal sets within
// the blast radius (GPUs evicted <= GPUs needed + the largest victim gang), the best
// found by (highest victim priority, GPUs evicted, number of victims, most recently
// admitted first): search.go. Fit checks run on a copy of the rows that can matter
// (workcopy.go). KueueHeuristic is Kueue's own remove-then-add-back
// search, kept as the baseline the benchmarks and tests compare against. With fair
// sharing on, victims in the cohort are chosen by Kueue's fair-sharing preemption over
// admission's weighted dominant-resource shares (fairsharing.go).
package preemption
