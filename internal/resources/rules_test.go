package resources_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
)

// bundleRules is testdata/bundle_rules.json: the cases the Python client's test suite
// (pyclient/tests/test_resource_rules.py) runs too.
type bundleRules struct {
	MaxNameBytes int      `json:"max_name_bytes"`
	MaxAmount    float64  `json:"max_amount"`
	MIGProfiles  []string `json:"mig_profiles"`
	Cases        []struct {
		Name   string                     `json:"name"`
		Bundle map[string]json.RawMessage `json:"bundle"`
		Error  *struct {
			Field    string   `json:"field"`
			Contains []string `json:"contains"`
		} `json:"error"`
	} `json:"cases"`
}

func loadBundleRules(t *testing.T) bundleRules {
	t.Helper()
	raw, err := os.ReadFile("testdata/bundle_rules.json")
	if err != nil {
		t.Fatal(err)
	}
	var rules bundleRules
	if err := json.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("testdata/bundle_rules.json: %v", err)
	}
	return rules
}

// amountOf reads a case's amount: a number, or "nan", "inf", "-inf".
func amountOf(t *testing.T, raw json.RawMessage) float64 {
	t.Helper()
	var word string
	if json.Unmarshal(raw, &word) == nil {
		switch word {
		case "nan":
			return math.NaN()
		case "inf":
			return math.Inf(1)
		case "-inf":
			return math.Inf(-1)
		}
		t.Fatalf("amount %q: not nan, inf or -inf", word)
	}
	var number float64
	if err := json.Unmarshal(raw, &number); err != nil {
		t.Fatalf("amount %s: %v", raw, err)
	}
	return number
}

func TestSharedBundleRules(t *testing.T) {
	rules := loadBundleRules(t)
	if rules.MaxNameBytes != resources.MaxNameBytes {
		t.Errorf("max_name_bytes %d, the Go limit is %d", rules.MaxNameBytes, resources.MaxNameBytes)
	}
	if _, err := resources.AmountFromFloat(rules.MaxAmount); err != nil {
		t.Errorf("max_amount %v refused: %v", rules.MaxAmount, err)
	}
	if _, err := resources.AmountFromFloat(math.Nextafter(rules.MaxAmount+1, math.Inf(1))); err == nil {
		t.Errorf("an amount above max_amount %v is accepted", rules.MaxAmount)
	}
	var profiles []string
	for _, model := range mig.Models() {
		for _, profile := range model.Profiles() {
			if !slices.Contains(profiles, profile.Name) {
				profiles = append(profiles, profile.Name)
			}
		}
	}
	slices.Sort(profiles)
	if listed := slices.Sorted(slices.Values(rules.MIGProfiles)); !slices.Equal(listed, profiles) {
		t.Errorf("mig_profiles lists %v, the MIG tables have %v", listed, profiles)
	}
	for _, c := range rules.Cases {
		wire := map[string]float64{}
		for name, raw := range c.Bundle {
			wire[name] = amountOf(t, raw)
		}
		_, err := resources.ParseBundle(wire)
		switch {
		case c.Error == nil && err != nil:
			t.Errorf("%s: %v, want it accepted", c.Name, err)
		case c.Error == nil:
		case err == nil:
			t.Errorf("%s: accepted, want an error on %q", c.Name, c.Error.Field)
		default:
			var fieldErr *fielderr.Error
			if !errors.As(err, &fieldErr) || !errors.Is(err, fielderr.ErrInvalid) || fieldErr.Field != c.Error.Field {
				t.Errorf("%s: %v, want a field error on %q", c.Name, err, c.Error.Field)
			}
			for _, words := range c.Error.Contains {
				if !strings.Contains(err.Error(), words) {
					t.Errorf("%s: %q does not say %q", c.Name, err, words)
				}
			}
		}
	}
}
