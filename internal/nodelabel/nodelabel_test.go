package nodelabel_test

import (
	"errors"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
)

func TestLabelSelectorForms(t *testing.T) {
	h100 := map[string]string{"ray.io/accelerator-type": "H100", "zone": "a"}
	a100 := map[string]string{"ray.io/accelerator-type": "A100", "zone": "b"}
	unlabeled := map[string]string{}

	cases := []struct {
		expression string
		canonical  string
		matches    [3]bool // h100, a100, unlabeled
	}{
		{"H100", "H100", [3]bool{true, false, false}},
		{"in(H100,B200)", "in(H100,B200)", [3]bool{true, false, false}},
		{"in(H100, A100)", "in(H100,A100)", [3]bool{true, true, false}},
		{"!H100", "!H100", [3]bool{false, true, true}}, // a "!" form matches a node lacking the label
		{"!in(H100,A100)", "!in(H100,A100)", [3]bool{false, false, true}},
		{"in(A100)", "A100", [3]bool{false, true, false}},
		{"exists()", "exists()", [3]bool{true, true, false}},    // NodeLabelSchedulingStrategy's Exists
		{"!exists()", "!exists()", [3]bool{false, false, true}}, // and DoesNotExist
	}
	for _, c := range cases {
		selector, err := nodelabel.ParseSelector(map[string]string{"ray.io/accelerator-type": c.expression})
		if err != nil {
			t.Fatalf("%q: %v", c.expression, err)
		}
		if got := selector[0].Expression(); got != c.canonical {
			t.Errorf("%q: Expression() = %q, want %q", c.expression, got, c.canonical)
		}
		for i, labels := range []map[string]string{h100, a100, unlabeled} {
			if got := selector.Matches(labels); got != c.matches[i] {
				t.Errorf("%q matches %v = %v, want %v", c.expression, labels, got, c.matches[i])
			}
		}
	}
}

func TestLabelSelectorEveryConstraintMustMatch(t *testing.T) {
	selector, err := nodelabel.ParseSelector(map[string]string{"zone": "!c", "ray.io/accelerator-type": "H100"})
	if err != nil {
		t.Fatal(err)
	}
	if got := selector.String(); got != "{ray.io/accelerator-type: H100, zone: !c}" {
		t.Errorf("String() = %q (keys must be sorted)", got)
	}
	if !selector.Matches(map[string]string{"ray.io/accelerator-type": "H100", "zone": "a"}) {
		t.Error("should match H100 in zone a")
	}
	if selector.Matches(map[string]string{"ray.io/accelerator-type": "H100", "zone": "c"}) {
		t.Error("should not match zone c")
	}
	empty, err := nodelabel.ParseSelector(nil)
	if err != nil || !empty.Matches(nil) {
		t.Errorf("an empty selector matches every node: %v %v", empty, err)
	}
}

func TestLabelSelectorMalformed(t *testing.T) {
	cases := []struct {
		key, expression, want string
	}{
		{"zone", "", `["zone"]: malformed selector value "": values must not be empty`},
		{"zone", "in(a,)", `["zone"]: malformed selector value "in(a,)": values must not be empty`},
		{"zone", "in(a,b", `["zone"]: malformed selector value "in(a,b": in(...) is missing its closing parenthesis`},
		{"zone", "!", `["zone"]: malformed selector value "!": values must not be empty`},
		{"zone", "a b", `["zone"]: malformed selector value "a b": value "a b" must be at most 63 characters, alphanumeric at both ends, with - _ . and alphanumerics between`},
		{"zone", "-a", `["zone"]: malformed selector value "-a": value "-a" must be at most 63 characters, alphanumeric at both ends, with - _ . and alphanumerics between`},
		{"bad key", "a", `["bad key"]: invalid label key name "bad key": must be 1-63 characters, alphanumeric at both ends, with - _ . and alphanumerics between`},
		{"a/b/c", "a", `["a/b/c"]: invalid label key name "b/c": must be 1-63 characters, alphanumeric at both ends, with - _ . and alphanumerics between`},
		{"/zone", "a", `["/zone"]: invalid label key prefix "": must be DNS labels separated by dots, at most 253 characters`},
	}
	for _, c := range cases {
		_, err := nodelabel.ParseSelector(map[string]string{c.key: c.expression})
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %q: error = %v\nwant %s", c.key, c.expression, err, c.want)
		}
		if !errors.Is(err, nodelabel.ErrInvalidSelector) {
			t.Errorf("%q: %q: error does not wrap ErrInvalidLabelSelector", c.key, c.expression)
		}
	}
}
