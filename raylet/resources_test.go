package raylet

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/resources"
)

func TestDetectTotalsAddsRaysImplicitResources(t *testing.T) {
	memory := float64(totalMemoryBytes())
	if memory == 0 {
		t.Skip("no /proc/meminfo")
	}
	defaultStore := min(memory*objectStoreMemoryShare, objectStoreMaxBytes)
	cases := []struct {
		name      string
		head      bool
		resources map[string]float64
		want      map[string]float64 // exact amounts; absent names in absent must not be set
		absent    []string
	}{
		{"head", true, nil, map[string]float64{"node:10.0.0.5": 1, resources.HeadNode: 1}, nil},
		{"worker", false, nil, map[string]float64{"node:10.0.0.5": 1}, []string{resources.HeadNode}},
		{"object store set", false, map[string]float64{resources.ObjectStoreMemory: 100 << 20},
			map[string]float64{resources.ObjectStoreMemory: 100 << 20, resources.Memory: memory - 100<<20}, nil},
		{"memory set keeps the default object store", false, map[string]float64{resources.Memory: 1 << 30},
			map[string]float64{resources.Memory: 1 << 30}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NodeIP, cfg.IsHead, cfg.Resources = "10.0.0.5", tc.head, tc.resources
			totals, _ := detectTotals(cfg)
			for name, want := range tc.want {
				if got, ok := totals[name]; !ok || got != want {
					t.Errorf("totals[%q] = %v (set %v), want %v", name, got, ok, want)
				}
			}
			for _, name := range tc.absent {
				if _, ok := totals[name]; ok {
					t.Errorf("totals[%q] set on a non-head node", name)
				}
			}
			if _, set := tc.resources[resources.ObjectStoreMemory]; !set {
				if got := totals[resources.ObjectStoreMemory]; got < defaultStore-1 || got > defaultStore {
					t.Errorf("object_store_memory = %v, want Ray's default %v", got, defaultStore)
				}
			}
			if _, set := tc.resources[resources.Memory]; !set {
				if got := totals[resources.Memory] + totals[resources.ObjectStoreMemory]; got != memory {
					t.Errorf("memory + object_store_memory = %v, want the node's memory %v", got, memory)
				}
			}
		})
	}
}

func TestConfigRefusesTheHeadNodeResource(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Resources = map[string]float64{resources.HeadNode: 1}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), resources.HeadNode) {
		t.Fatalf("Validate() = %v, want an error naming %s", err, resources.HeadNode)
	}
}
