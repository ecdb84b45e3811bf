package nodelabel_test

import (
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
)

// FuzzParseSelector: a selector is refused with an error naming its key, or accepted as
// one that Check accepts too and that prints with its key.
func FuzzParseSelector(f *testing.F) {
	for _, seed := range [][3]string{{"zone", "a", "a"}, {"ray.io/accelerator-type", "in(A100,H100)", "H100"}, {"market", "!spot", "spot"},
		{"k", "!in(a,b)", "c"}, {"bad key/x/y", "a", ""}, {"zone", "in(a,", "a"}, {"", "", ""}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, key, expression, value string) {
		selector, err := nodelabel.ParseSelector(map[string]string{key: expression})
		if err != nil {
			if !strings.Contains(err.Error(), nodelabel.Field(key)) {
				t.Fatalf("refusal %q does not name the key %q", err, key)
			}
			return
		}
		if err := selector.Check(); err != nil {
			t.Fatalf("parsed selector %v fails Check: %v", selector, err)
		}
		if !strings.Contains(selector.String(), key) {
			t.Fatalf("selector %v does not print its key %q", selector, key)
		}
		// "!e" matches exactly the nodes "e" does not.
		if positive, ok := strings.CutPrefix(expression, "!"); ok {
			if plain, err := nodelabel.ParseSelector(map[string]string{key: positive}); err == nil {
				for _, labels := range []map[string]string{{key: value}, {}} {
					if plain.Matches(labels) == selector.Matches(labels) {
						t.Fatalf("%q and %q agree on %v", positive, expression, labels)
					}
				}
			}
		}
	})
}
