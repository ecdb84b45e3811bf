package resources

import (
	"errors"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

func TestCheckFitsBundle(t *testing.T) {
	bundles := []Set{
		{"CPU": 2 * AmountScale},
		{"CPU": AmountScale, "GPU": AmountScale},
	}
	cases := []struct {
		name    string
		index   int
		request Set
		want    error
		mention string
	}{
		{"fits its bundle", 1, Set{"GPU": AmountScale}, nil, ""},
		{"empty request fits", 0, Set{}, nil, ""},
		{"any bundle, one fits", AnyBundle, Set{"GPU": AmountScale / 2}, nil, ""},
		{"too much for the named bundle", 0, Set{"GPU": AmountScale}, ErrFitsNoBundle, "bundle 0 of placement group pg1 holds {CPU: 2}"},
		{"fits no bundle", AnyBundle, Set{"CPU": 3 * AmountScale}, ErrFitsNoBundle, "bundle 1 {CPU: 1, GPU: 1}"},
		{"index past the end", 2, Set{}, ErrBundleIndex, "bundles 0..1, got 2"},
		{"index below -1", -2, Set{}, ErrBundleIndex, "got -2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFitsBundle("pg1", bundles, tc.index, tc.request)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, fielderr.ErrInvalid) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "placement_group_bundle_index") || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q does not name the field and %q", err, tc.mention)
			}
		})
	}
}
