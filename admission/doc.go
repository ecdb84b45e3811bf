// Package admission decides which pending workloads (placement groups, gangs) may start
// under the queue configuration of admission/queues: Kueue's quota semantics (nominal
// quota, borrowing and lending limits within a flat cohort), gangs admitted whole,
// priority then arrival inside a queue (BestEffortFIFO or StrictFIFO), Kueue's classic
// order or weighted dominant-resource fair sharing across queues, and EASY backfill
// with at most one reservation per cohort (and per queue outside any cohort).
//
// Decide is pure: configuration, usage, pending workloads and a Capacity oracle in, a
// Decision out; no I/O, no clock, no goroutines. The caller (the GCS loop) owns the
// clock, the placement and the Ledger of what is charged.
package admission
