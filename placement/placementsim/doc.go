// Package placementsim is a simulated cluster for testing and measuring the placement
// core: a fake GCS ledger (Cluster) that reserves plans in a placement.Snapshot and
// checks the invariants every test may assert, seeded generators of GPU fleets and
// placement-group request streams, and the decision-latency benchmark.
//
// Like placement it does no I/O and starts no goroutines; randomness comes from seeds
// and the clock is passed in (RunDecisionLatency's now), so runs are reproducible.
package placementsim
