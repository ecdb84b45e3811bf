package nodelabel

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

func TestCheckLabels(t *testing.T) {
	good := map[string]string{NodeID: strings.Repeat("ab", 28), AcceleratorType: "H100", "zone": "us-east-1a", "spot": "", "example.com/team": "ml_infra"}
	if err := CheckLabels(good); err != nil {
		t.Fatalf("%v", err)
	}
	for name, tc := range map[string]struct {
		labels map[string]string
		field  string
	}{
		"space in value":      {map[string]string{"zone": "us east"}, `["zone"]`},
		"value over 63 bytes": {map[string]string{"zone": strings.Repeat("a", 64)}, `["zone"]`},
		"empty key":           {map[string]string{"": "a"}, `[""]`},
		"NUL in key":          {map[string]string{"a\x00b": "a"}, `["a\x00b"]`},
		"bad prefix":          {map[string]string{"-x/y": "a"}, `["-x/y"]`},
	} {
		err := CheckLabels(tc.labels)
		var fieldErr *fielderr.Error
		if !errors.As(err, &fieldErr) || !errors.Is(err, ErrInvalidLabel) || fieldErr.Field != tc.field {
			t.Fatalf("%s: %v, want an ErrInvalidLabel naming %s", name, err, tc.field)
		}
	}
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	if err := CheckLabels(many); !errors.Is(err, ErrInvalidLabel) {
		t.Fatalf("%d labels: %v", len(many), err)
	}
}
