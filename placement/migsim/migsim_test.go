package migsim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
)

func smallConfig() Config {
	config := DefaultConfig()
	config.Nodes = 2
	config.Requests = 600
	config.Seeds = []uint64{3, 4}
	return config
}

// A short run on two nodes: deterministic, every count consistent, both policies fed
// the same stream, and the fleet filled so that requests are refused.
func TestRunIsSeededAndConsistent(t *testing.T) {
	config := smallConfig()
	first, err := Run(config)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Run(config)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatal("the same config gave two results")
	}
	for _, r := range []RunResult{first.BestFit, first.FirstFit} {
		if r.Requests != config.Requests*len(config.Seeds) || r.Accepted > r.Requests || r.Accepted == r.Requests || r.Accepted == 0 {
			t.Errorf("%s: accepted %d of %d, want some refused", r.Policy, r.Accepted, r.Requests)
		}
		if !reflect.DeepEqual(r.RequestsByProfile, first.BestFit.RequestsByProfile) {
			t.Errorf("%s: another stream: %v", r.Policy, r.RequestsByProfile)
		}
		accepted := 0
		for name, n := range r.AcceptedByProfile {
			accepted += n
			if n > r.RequestsByProfile[name] {
				t.Errorf("%s: %s accepted %d of %d", r.Policy, name, n, r.RequestsByProfile[name])
			}
		}
		if accepted != r.Accepted || r.UnusableSlices > r.FreeSlices || r.MeanHeldFraction <= 0.5 || r.MeanHeldFraction > 1 {
			t.Errorf("%s: inconsistent %+v", r.Policy, r)
		}
		if r.Destroyed != 0 || r.Reused != 0 {
			t.Errorf("%s: without the idle pool, %d destroyed and %d reused", r.Policy, r.Destroyed, r.Reused)
		}
	}
	if want := float64(first.BestFit.Accepted) / float64(first.FirstFit.Accepted); first.AcceptedRatio != want {
		t.Errorf("AcceptedRatio %v, want %v", first.AcceptedRatio, want)
	}
}

func TestRunWithIdlePoolReusesAndDestroys(t *testing.T) {
	config := smallConfig()
	config.IdlePool = true
	result, err := Run(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []RunResult{result.BestFit, result.FirstFit} {
		if r.Reused == 0 || r.Destroyed == 0 {
			t.Errorf("%s: reused %d, destroyed %d; want both", r.Policy, r.Reused, r.Destroyed)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"Nodes and GPUsPerNode must be >= 1": func(c *Config) { c.GPUsPerNode = 0 },
		`Model "B200" is not a MIG model`:    func(c *Config) { c.Model = "B200" },
		"Mix must not be empty":              func(c *Config) { c.Mix = nil },
		`Mix[1]: "1g.5gb" with weight 1`:     func(c *Config) { c.Mix = []ProfileWeight{{"1g.10gb", 1}, {"1g.5gb", 1}} },
		"Requests must be >= 1":              func(c *Config) { c.Requests = 0 },
		"OfferedLoad must be > 0":            func(c *Config) { c.OfferedLoad = 0 },
		"Seeds must not be empty":            func(c *Config) { c.Seeds = nil },
	}
	for want, change := range cases {
		config := DefaultConfig()
		change(&config)
		if err := config.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
		if _, err := Run(config); err == nil {
			t.Errorf("Run accepted a config with %q", want)
		}
	}
	if DefaultConfig().Model != mig.H100_80GB {
		t.Error("the benchmark fleet is not H100-80GB")
	}
}
