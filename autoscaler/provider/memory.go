package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Memory is an in-memory Provider for tests of the code around providers: instances
// exist only in its table, run at once, and nothing joins a cluster. Fail makes the
// next launches of a type fail. It is safe for concurrent use.
type Memory struct {
	mu        sync.Mutex
	now       func() time.Time
	next      int
	instances map[string]Instance
	failures  map[string]error
	// Launches counts Launch calls per node type, failed ones included.
	launches map[string]int
}

var _ Provider = (*Memory)(nil)

// NewMemory returns an empty provider whose LaunchedAt times come from now.
func NewMemory(now func() time.Time) *Memory {
	return &Memory{now: now, instances: map[string]Instance{}, failures: map[string]error{}, launches: map[string]int{}}
}

// Fail makes every launch of nodeType fail with err until Fail(nodeType, nil).
func (m *Memory) Fail(nodeType string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.failures, nodeType)
		return
	}
	m.failures[nodeType] = err
}

// Launches reports how many times Launch was called for nodeType.
func (m *Memory) Launches(nodeType string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.launches[nodeType]
}

func (m *Memory) Launch(_ context.Context, req LaunchRequest) ([]Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.launches[req.NodeType]++
	if err := m.failures[req.NodeType]; err != nil {
		return nil, err
	}
	var out []Instance
	for range req.Count {
		m.next++
		inst := Instance{ID: fmt.Sprintf("mem-%d", m.next), NodeType: req.NodeType, State: InstanceRunning, LaunchedAt: m.now(), RequestID: req.RequestID}
		m.instances[inst.ID] = inst
		out = append(out, inst)
	}
	return out, nil
}

func (m *Memory) Terminate(_ context.Context, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.instances, id)
	}
	return nil
}

func (m *Memory) Instances(context.Context) ([]Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Instance, 0, len(m.instances))
	for _, id := range slices.Sorted(maps.Keys(m.instances)) {
		out = append(out, m.instances[id])
	}
	return out, nil
}
