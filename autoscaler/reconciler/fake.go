package reconciler

import (
	"context"
	"sync"
	"time"
)

// FakeCluster is an in-memory Cluster for tests of the reconciler: the test sets the
// observation, chooses which drains the "GCS" refuses, and reads the reports. It is safe
// for concurrent use.
type FakeCluster struct {
	mu sync.Mutex
	// Obs is returned by Observe.
	Obs Observation
	// Busy lists node ids whose idle drains are refused.
	Busy map[string]bool
	// Drained records accepted drains by node id.
	Drained map[string]DrainReason
	// Last is the last status reported.
	Last Status
}

var _ Cluster = (*FakeCluster)(nil)

// NewFakeCluster returns an empty cluster.
func NewFakeCluster() *FakeCluster {
	return &FakeCluster{Busy: map[string]bool{}, Drained: map[string]DrainReason{}}
}

// Set replaces the observation.
func (f *FakeCluster) Set(obs Observation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Obs = obs
}

func (f *FakeCluster) Observe(context.Context) (Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Obs, nil
}

func (f *FakeCluster) DrainNode(_ context.Context, nodeID string, reason DrainReason, _ string, _ time.Time) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if reason == DrainIdle && f.Busy[nodeID] {
		return false, "the node is not idle", nil
	}
	f.Drained[nodeID] = reason
	return true, "", nil
}

func (f *FakeCluster) Report(_ context.Context, status Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Last = status
	return nil
}
