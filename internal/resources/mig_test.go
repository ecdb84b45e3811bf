package resources_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/resources"
)

func TestCheckMIGResource(t *testing.T) {
	one := resources.Amount(resources.AmountScale)
	for _, ok := range []struct {
		resource string
		amount   resources.Amount
	}{{"GPU", 3 * one}, {"nvidia.com/mig-1g.10gb", one}, {"nvidia.com/mig-7g.141gb", one}, {"nvidia.com/mig-1g.5gb.me", one}, {"nvidia.com/mig-2g.20gb", 0}} {
		if err := resources.CheckMIGResource(ok.resource, ok.amount); err != nil {
			t.Errorf("resources.CheckMIGResource(%q, %s) = %v", ok.resource, ok.amount, err)
		}
	}

	err := resources.CheckMIGResource("nvidia.com/mig-3g.99gb", one)
	var fieldErr *fielderr.Error
	if !errors.Is(err, resources.ErrUnknownMIGProfile) || !errors.Is(err, fielderr.ErrInvalid) || !errors.As(err, &fieldErr) {
		t.Fatalf("unknown profile: %v", err)
	}
	const want = `["nvidia.com/mig-3g.99gb"]: no supported GPU model has this MIG profile (` +
		`A100-40GB has 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb; ` +
		`A100-80GB has 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; ` +
		`H100-80GB has 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; ` +
		`H200-141GB has 1g.18gb, 1g.18gb+me, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb)`
	if err.Error() != want {
		t.Errorf("unknown profile message:\n got %s\nwant %s", err, want)
	}

	err = resources.CheckMIGResource("nvidia.com/mig-1g.10gb", 2*one)
	if !errors.Is(err, resources.ErrInvalidMIGAmount) || !errors.Is(err, fielderr.ErrInvalid) ||
		!strings.Contains(err.Error(), `["nvidia.com/mig-1g.10gb"]: a bundle gets at most one MIG device`) ||
		!strings.Contains(err.Error(), "got 2 (MIG profile 1g.10gb of A100-40GB, A100-80GB, H100-80GB)") {
		t.Errorf("amount 2: %v", err)
	}
	if err := resources.CheckMIGResource("nvidia.com/mig-1g.10gb", one/2); !errors.Is(err, resources.ErrInvalidMIGAmount) {
		t.Errorf("amount 0.5: %v", err)
	}
}
