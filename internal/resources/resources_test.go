package resources_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/internal/testutil/resourcespec"
)

func TestAmountFromFloat(t *testing.T) {
	cases := []struct {
		in      float64
		want    resources.Amount
		wantErr string
	}{
		{in: 0, want: 0},
		{in: 1, want: 10000},
		{in: 0.5, want: 5000},
		{in: 0.0001, want: 1},
		{in: 0.1, want: 1000}, // 0.1*10000 is 1000.0000000000001 in floating point
		{in: 0.00005, want: 1},
		{in: 0.00004, want: 0},
		{in: 3.14159, want: 31416},
		{in: 2 * (1 << 40), want: 2 * (1 << 40) * 10000}, // 2 TiB of memory in bytes
		{in: -1, wantErr: "amount must be a finite number >= 0, got -1"},
		{in: math.NaN(), wantErr: "amount must be a finite number >= 0, got NaN"},
		{in: math.Inf(1), wantErr: "amount must be a finite number >= 0, got +Inf"},
		{in: math.Inf(-1), wantErr: "amount must be a finite number >= 0, got -Inf"},
		{in: 1e18, wantErr: "amount must be at most 922337203685476, got 1e+18"},
	}
	for _, c := range cases {
		got, err := resources.AmountFromFloat(c.in)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("AmountFromFloat(%v) error = %v, want %q", c.in, err, c.wantErr)
			}
			if !errors.Is(err, resources.ErrInvalidAmount) {
				t.Errorf("AmountFromFloat(%v) error does not wrap ErrInvalidAmount", c.in)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("AmountFromFloat(%v) = %v, %v; want %v", c.in, int64(got), err, int64(c.want))
		}
	}
}

func TestAmountString(t *testing.T) {
	cases := map[resources.Amount]string{
		0: "0", 10000: "1", 80000: "8", 5000: "0.5", 10001: "1.0001", 1: "0.0001", 1230: "0.123",
		-10000: "-1", -5: "-0.0005", math.MinInt64: "-922337203685477.5808",
	}
	for amount, want := range cases {
		if got := amount.String(); got != want {
			t.Errorf("Amount(%d).String() = %q, want %q", int64(amount), got, want)
		}
	}
}

// Sums of fractional bundles never drift: 10000 bundles of 0.0001 GPU are exactly 1.
func TestFractionalSumsAreExact(t *testing.T) {
	tiny := resourcespec.Parse("GPU=0.0001")
	sum := resources.Set{}
	floatSum := 0.0
	for range 10000 {
		sum = sum.Add(tiny)
		floatSum += 0.0001
	}
	if !sum.Equal(resourcespec.Parse("GPU=1")) {
		t.Fatalf("sum = %s, want exactly {GPU: 1}", sum)
	}
	if floatSum == 1 {
		t.Log("float64 happened not to drift; the fixed-point check above is what matters")
	}
	for range 10000 {
		var err error
		if sum, err = sum.Subtract(tiny); err != nil {
			t.Fatal(err)
		}
	}
	if !sum.IsZero() || len(sum) != 0 {
		t.Fatalf("after subtracting everything: %s, want {}", sum)
	}
}

func TestResourceSetFromFloatNamesTheKey(t *testing.T) {
	cases := []struct {
		in   map[string]float64
		want string
	}{
		{map[string]float64{"CPU": 1, "GPU": -1}, `["GPU"]: amount must be a finite number >= 0, got -1`},
		{map[string]float64{"": 1}, `[""]: resource name must not be empty`},
		{map[string]float64{string(make([]byte, 257)): 1}, `: resource name must be at most 256 bytes, got 257`},
	}
	for _, c := range cases {
		_, err := resources.SetFromFloat(c.in)
		if err == nil || !endsWith(err.Error(), c.want) {
			t.Errorf("SetFromFloat(%v) error = %v, want suffix %q", c.in, err, c.want)
		}
	}
}

func endsWith(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

func TestResourceSetOperations(t *testing.T) {
	a := resourcespec.Parse("CPU=8 GPU=1 memory=1024")
	b := resourcespec.Parse("CPU=2.5 GPU=1")

	if got, want := a.Add(b), resourcespec.Parse("CPU=10.5 GPU=2 memory=1024"); !got.Equal(want) {
		t.Errorf("Add = %s, want %s", got, want)
	}
	diff, err := a.Subtract(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := resourcespec.Parse("CPU=5.5 memory=1024"); !diff.Equal(want) {
		t.Errorf("Subtract = %s, want %s", diff, want)
	}
	if _, ok := diff["GPU"]; ok {
		t.Errorf("Subtract kept a zero entry: %s", diff)
	}
	_, err = b.Subtract(a)
	if !errors.Is(err, resources.ErrInsufficientResources) || err.Error() != `["CPU"]: cannot subtract 8 from 2.5` {
		t.Errorf("Subtract below zero error = %v", err)
	}
	if !b.IsSubsetOf(a) || a.IsSubsetOf(b) {
		t.Errorf("IsSubsetOf: b ⊆ a should hold and a ⊆ b should not")
	}
	if !resourcespec.Parse("ssd=1").IsSubsetOf(resourcespec.Parse("ssd=1")) || resourcespec.Parse("ssd=1").IsSubsetOf(a) {
		t.Errorf("IsSubsetOf with missing names is wrong")
	}
	if !(resources.Set{"GPU": 0}).IsZero() || a.IsZero() || !resources.Set(nil).IsZero() {
		t.Errorf("IsZero is wrong")
	}
	if got := a.String(); got != "{CPU: 8, GPU: 1, memory: 1024}" {
		t.Errorf("String = %q", got)
	}
	if got := a.Names(); len(got) != 3 || got[0] != "CPU" || got[1] != "GPU" || got[2] != "memory" {
		t.Errorf("Names = %v", got)
	}
	if got := resourcespec.Parse("CPU=0.5").ToFloat(); got["CPU"] != 0.5 || len(got) != 1 {
		t.Errorf("ToFloat = %v", got)
	}
	clone := a.Clone()
	clone["CPU"] = 0
	if a["CPU"] != 80000 {
		t.Errorf("Clone shares storage with the original")
	}
}

func TestSumOfRefusesTotalsPastTheLargestAmount(t *testing.T) {
	sum, err := resources.SumOf([]resources.Set{resourcespec.Parse("CPU=1 GPU=0.5"), resourcespec.Parse("CPU=2 GPU=0.5"), nil})
	if err != nil || !sum.Equal(resourcespec.Parse("CPU=3 GPU=1")) {
		t.Fatalf("SumOf = %v, %v", sum, err)
	}
	half := resources.MaxAmount / 2
	if _, err := resources.SumOf([]resources.Set{{"CPU": half}, {"CPU": resources.MaxAmount - half}}); err != nil {
		t.Errorf("a total of exactly MaxAmount refused: %v", err)
	}
	_, err = resources.SumOf([]resources.Set{{"CPU": resources.MaxAmount}, {"GPU": 1, "CPU": 1}})
	if !errors.Is(err, resources.ErrInvalidAmount) || !strings.HasPrefix(err.Error(), `["CPU"]: the total`) {
		t.Errorf("a total past MaxAmount: %v", err)
	}
	if got, err := resources.AmountFromFloat(922337203685476); err != nil || got != resources.MaxAmount {
		t.Errorf("the largest float amount is %v (%v), MaxAmount %v", got, err, resources.MaxAmount)
	}
}
