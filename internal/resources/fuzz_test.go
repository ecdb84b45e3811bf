package resources_test

import (
	"strconv"
	"testing"

	"github.com/raygo-dev/raygo/internal/resources"
)

// FuzzAmounts: an accepted amount is within [0, MaxAmount], prints as a decimal that
// parses back to itself (to float64's precision), and adding or subtracting it never
// wraps around.
func FuzzAmounts(f *testing.F) {
	for _, seed := range [][2]float64{{1, 2}, {0.0001, 0.00005}, {922337203685476, 1}, {-1, 3}, {1e300, 0}, {0.5, 0.25}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, x, y float64) {
		a, errA := resources.AmountFromFloat(x)
		b, errB := resources.AmountFromFloat(y)
		for _, amount := range []struct {
			a   resources.Amount
			err error
		}{{a, errA}, {b, errB}} {
			if amount.err != nil {
				continue
			}
			if amount.a < 0 || amount.a > resources.MaxAmount {
				t.Fatalf("accepted amount %d out of [0, MaxAmount]", amount.a)
			}
			parsed, err := strconv.ParseFloat(amount.a.String(), 64)
			if err != nil {
				t.Fatalf("amount prints as %q: %v", amount.a, err)
			}
			// The wire form is a float64: an amount comes back exactly while its decimal
			// fits float64's 53 bits, else within float64's relative precision.
			back, err := resources.AmountFromFloat(parsed)
			if err != nil {
				t.Fatalf("%q does not parse back: %v", amount.a, err)
			}
			if diff := back - amount.a; diff != 0 && (amount.a < 1<<53/resources.AmountScale || max(diff, -diff) > amount.a>>50+1) {
				t.Fatalf("%q parses back to %v", amount.a, back)
			}
		}
		if errA != nil || errB != nil {
			return
		}
		sum, err := resources.SumOf([]resources.Set{{"x": a}, {"x": b}})
		if err == nil && (sum["x"] < a || sum["x"] < b) {
			t.Fatalf("%s + %s wrapped to %s", a, b, sum["x"])
		}
		if err != nil && a <= resources.MaxAmount-b {
			t.Fatalf("%s + %s refused although within MaxAmount: %v", a, b, err)
		}
		if diff, err := (resources.Set{"x": a}).Subtract(resources.Set{"x": b}); err == nil && diff["x"] < 0 {
			t.Fatalf("%s - %s = %s", a, b, diff["x"])
		}
	})
}
