package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/raylet"
)

// InProcess is a GCS and raylets running inside the test process, on loopback: the same
// servers as the processes `raygo start` runs, without process start-up costs.
type InProcess struct {
	t       testing.TB
	GCS     *gcs.Server
	Raylets []*raylet.Raylet
}

// StartInProcess starts a GCS on the given store (memory when nil) with a free port.
func StartInProcess(t testing.TB, st store.Store, mutate ...func(*gcs.Config)) *InProcess {
	t.Helper()
	if st == nil {
		st = store.NewMemory()
	}
	cfg := gcs.DefaultConfig()
	cfg.Port, cfg.Store = 0, st
	for _, m := range mutate {
		m(&cfg)
	}
	server, err := gcs.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start GCS: %v", err)
	}
	c := &InProcess{t: t, GCS: server}
	t.Cleanup(func() {
		for _, r := range c.Raylets {
			r.Stop()
		}
		server.Stop()
	})
	return c
}

// AddRaylet starts a raylet with exactly these resources (CPU and GPU default to 0, so
// tests do not depend on the machine) and labels.
func (c *InProcess) AddRaylet(resources map[string]float64, labels map[string]string) *raylet.Raylet {
	c.t.Helper()
	return c.AddRayletWith(func(cfg *raylet.Config) {
		for k, v := range resources {
			cfg.Resources[k] = v
		}
		cfg.Labels = labels
	})
}

// AddRayletWith starts a raylet as AddRaylet does (no resources but what mutate sets),
// with mutate applied to its config last: e.g. IsHead, or another loopback NodeIP.
func (c *InProcess) AddRayletWith(mutate func(*raylet.Config)) *raylet.Raylet {
	c.t.Helper()
	cfg := raylet.DefaultConfig()
	cfg.GCSAddress = c.GCS.Address()
	cfg.Resources = map[string]float64{"CPU": 0, "GPU": 0}
	cfg.NodeName = fmt.Sprintf("node-%d", len(c.Raylets))
	cfg.HeartbeatInterval = 200 * time.Millisecond
	mutate(&cfg)
	r, err := raylet.Start(context.Background(), cfg)
	if err != nil {
		c.t.Fatalf("start raylet: %v", err)
	}
	c.Raylets = append(c.Raylets, r)
	return r
}

// Raylet returns the raylet with the given node id.
func (c *InProcess) Raylet(nodeID string) *raylet.Raylet {
	for _, r := range c.Raylets {
		if r.NodeID() == nodeID {
			return r
		}
	}
	return nil
}
