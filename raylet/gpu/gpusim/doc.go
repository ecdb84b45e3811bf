// Package gpusim simulates the GPU servers a raylet runs on, for machines without GPUs
// (`raygo start --gpu-sim`) and for tests: Simulate builds an nvml.Interface for a named
// machine (SimulatedModels) on go-nvml's dgxa100 mock devices and writes the matching
// PCI tree under a sysfs directory (sim.go, sim_sysfs.go). Every mock function the
// simulation leaves unset returns ERROR_NOT_SUPPORTED instead of panicking (mockfill.go).
//
// MIG is simulated as hardware behaves on the models that have MIG tables (A100, H100,
// H200): the real profile ids and placements, overlap and invalid starts refused, compute
// instances destroyed before their GPU instance (mig_sim.go, mig_sim_compute.go),
// replacing the dgxa100 mock's MIG functions. The simulation shares the MIG data tables
// (internal/mig) with the scheduler but never its feasibility code: whether an instance
// fits is decided by its own geometry check (mig_sim_geometry.go), cross-checked against
// the scheduler's allocator in a test, so a bug in either shows. SimulatedMIGState, or
// ReadSimulatedMIGState on SimOptions.MIGStateFile from another process, shows what the
// simulated driver holds (mig_sim_state.go).
//
// Activity (activity_sim.go) is read at every query from the control file
// SimOptions.ActivityFile (`raygo start --gpu-sim`: <session dir>/gpu-activity.json), which
// tests write with WriteSimActivity:
//
//	{"gpus": {"*": {"sm_active": 0.05}, "3": {"sm_active": 0.9, "gr_engine_active": 0.95,
//	  "fb_used_bytes": 42949672960}, "GPU-…": {…}, "0/7": {…}, "MIG-…": {…}}}
//
// A whole GPU takes the entry of its UUID, else of its index, else "*"; a MIG instance the
// entry of its MIG device UUID, else "<GPU index>/<GPU instance id>"; a device without one
// is idle with no memory used. sm_active and gr_engine_active are ratios 0 to 1;
// fb_used_bytes is GetMemoryInfo's Used. As hardware: GPM (GpmQueryDeviceSupport,
// GpmSampleGet, GpmMigSampleGet, GpmMetricsGet's SM and graphics utilization, in percent)
// on Hopper and later only, ERROR_NOT_SUPPORTED on A100; GetUtilizationRates on whole GPUs
// (gr_engine_active in percent), not on MIG devices. GPM metrics between two samples are
// the activity the second sample read.
//
// The package is the simulated hardware only: discovery and MIG carving are package gpu,
// which runs unchanged on a simulated machine and on a real one. Test helpers for code
// running on simulated GPUs are in gpusimtest.
//
// Concurrency: a simulated nvml.Interface is safe for concurrent use once Simulate has
// returned.
package gpusim
