package placement_test

import (
	"errors"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// FuzzParseRequest: whatever the wire request, ParseRequest either refuses it with a
// field error or returns a request that Validate accepts, whose amounts and totals stay
// within MaxAmount (an accepted overflow stopped all scheduling once).
func FuzzParseRequest(f *testing.F) {
	f.Add("PACK", "", "CPU", 1.0, "GPU", 0.5, 2, "zone", "in(a,b)")
	f.Add("STRICT_PACK", "node", "nvidia.com/mig-1g.10gb", 1.0, "CPU", 2.0, 3, "ray.io/node-id", "!x")
	f.Add("SPREAD", "", "CPU", 922337203685476.0, "CPU", 1e6, 2, "", "")
	f.Add("STRICT_SPREAD", "island", "", -1.0, "GPU", 1.5, 1, "k", "in(")
	f.Fuzz(func(t *testing.T, strategy, topology, name1 string, amount1 float64, name2 string, amount2 float64, count int, key, selector string) {
		count = 1 + abs(count)%8
		spec := placement.RequestSpec{Strategy: strategy, Topology: topology}
		for i := range count {
			bundle := map[string]float64{name1: amount1}
			if i%2 == 1 {
				bundle[name2] = amount2
			}
			spec.Bundles = append(spec.Bundles, bundle)
			if key != "" {
				spec.BundleLabelSelector = append(spec.BundleLabelSelector, map[string]string{key: selector})
			}
		}
		request, err := placement.ParseRequest(spec)
		if err != nil {
			var fieldErr *fielderr.Error
			if !errors.As(err, &fieldErr) || !errors.Is(err, placement.ErrInvalidRequest) {
				t.Fatalf("refusal %v is not a field error of an invalid request", err)
			}
			return
		}
		if err := request.Validate(); err != nil {
			t.Fatalf("ParseRequest accepted what Validate refuses: %v", err)
		}
		total, err := resources.SumOf(request.Bundles)
		if err != nil {
			t.Fatalf("accepted bundles whose total overflows: %v", err)
		}
		for name, amount := range total {
			if amount < 0 || amount > resources.MaxAmount {
				t.Fatalf("accepted a total of %s %s", amount, name)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
