package nodelabel

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// Well-known label keys. Ray's (ray.io/*) are set by every raylet on its own node; the
// fabric position keys (topology.raygo.io/*) by the operator or the cloud provider.
// The scheduler reads labels, it does not invent them.
const (
	// NodeID is the label every Ray node carries with its own id as value; a selector on
	// it pins a bundle to a node.
	NodeID = "ray.io/node-id"
	// AcceleratorType is the node's GPU model, as Ray's accelerator-type label.
	AcceleratorType = "ray.io/accelerator-type"
	// ScalableUnit names the node's scalable unit: the group of nodes whose NICs share
	// one set of rail leaf switches (a DGX SuperPOD SU is 32 nodes). Traffic between two
	// nodes of one SU on the same rail crosses one leaf switch; any other traffic between
	// nodes crosses the spine. SPREAD and STRICT_SPREAD choose the fewest SUs.
	ScalableUnit = "topology.raygo.io/su"
	// Rack names the node's rack. Informational for placement today (a multi-node NVLink
	// domain is given by the node's NVLink domain, not by the rack).
	Rack = "topology.raygo.io/rack"
	// InstanceID is the provider's id of the instance a node runs on, set by the
	// autoscaler when it launches the node: it ties the GCS's node to the instance.
	InstanceID = "autoscaler.raygo.io/instance-id"
	// NodeType is the cluster YAML's node type (available_node_types key) of a node the
	// autoscaler launched.
	NodeType = "autoscaler.raygo.io/node-type"
)

// Label syntax limits, as Ray's label_utils (Kubernetes-style keys and values).
const (
	maxNameBytes   = 63
	maxPrefixBytes = 253
)

// Constraint is one entry of a label selector: the node's value of Key must be
// one of Values, or with Negated, the node must lack Key or have a value outside Values.
// Ray's forms map as: "a" → {Values: [a]}, "in(a,b)" → {Values: [a b]},
// "!a" → {Values: [a], Negated}, "!in(a,b)" → {Values: [a b], Negated}. Exists (no
// Values) asks only that the node has Key, or with Negated that it lacks it: the wire
// form "exists()" / "!exists()" carries NodeLabelSchedulingStrategy's Exists and
// DoesNotExist, which Ray's string syntax has no form for.
type Constraint struct {
	Key     string
	Values  []string
	Negated bool
	Exists  bool
}

// existsExpression is the wire form of an Exists constraint.
const existsExpression = "exists()"

// Matches reports whether a node with these labels satisfies the constraint.
func (c Constraint) Matches(labels map[string]string) bool {
	value, present := labels[c.Key]
	if c.Exists {
		return present != c.Negated
	}
	return (present && slices.Contains(c.Values, value)) != c.Negated
}

// Expression prints the constraint's value in Ray's syntax: "a", "in(a,b)", "!a",
// "!in(a,b)", and "exists()" / "!exists()".
func (c Constraint) Expression() string {
	expression := ""
	if c.Negated {
		expression = "!"
	}
	if c.Exists {
		return expression + existsExpression
	}
	if len(c.Values) == 1 {
		return expression + c.Values[0]
	}
	return expression + "in(" + strings.Join(c.Values, ",") + ")"
}

// Selector is a bundle's label selector: every constraint must match. Constraints
// are sorted by key. An empty selector matches every node.
type Selector []Constraint

// ParseSelector parses one bundle's selector from the wire form (label key →
// expression). Errors name the key: `["zone"]: malformed selector value "in(a,)": ...`;
// callers prefix the field path (`bundle_label_selector[1]`).
func ParseSelector(selector map[string]string) (Selector, error) {
	if len(selector) == 0 {
		return nil, nil
	}
	parsed := make(Selector, 0, len(selector))
	for _, key := range slices.Sorted(maps.Keys(selector)) {
		constraint, err := parseConstraint(key, selector[key])
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, constraint)
	}
	return parsed, nil
}

// Matches reports whether a node with these labels satisfies every constraint.
func (s Selector) Matches(labels map[string]string) bool {
	_, mismatch := s.FirstMismatch(labels)
	return !mismatch
}

// String prints the selector in the wire form: {ray.io/accelerator-type: in(A100,H100), zone: !b}.
func (s Selector) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, constraint := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(constraint.Key)
		b.WriteString(": ")
		b.WriteString(constraint.Expression())
	}
	b.WriteByte('}')
	return b.String()
}

// FirstMismatch returns the first constraint the labels fail, for rejection reasons.
func (s Selector) FirstMismatch(labels map[string]string) (Constraint, bool) {
	for _, constraint := range s {
		if !constraint.Matches(labels) {
			return constraint, true
		}
	}
	return Constraint{}, false
}

// Check validates a selector built directly rather than parsed.
func (s Selector) Check() error {
	keys := make(map[string]bool, len(s))
	for _, constraint := range s {
		field := Field(constraint.Key)
		if keys[constraint.Key] {
			return fielderr.New(ErrInvalidSelector, field, "label key appears more than once")
		}
		keys[constraint.Key] = true
		if problem := keyProblem(constraint.Key); problem != "" {
			return fielderr.New(ErrInvalidSelector, field, "%s", problem)
		}
		if constraint.Exists && len(constraint.Values) > 0 {
			return fielderr.New(ErrInvalidSelector, field, "an exists() selector has no values")
		}
		if !constraint.Exists && len(constraint.Values) == 0 {
			return fielderr.New(ErrInvalidSelector, field, "selector has no values")
		}
		for _, value := range constraint.Values {
			if problem := valueProblem(value); problem != "" {
				return fielderr.New(ErrInvalidSelector, field, "malformed selector value %q: %s", constraint.Expression(), problem)
			}
		}
	}
	return nil
}

func parseConstraint(key, expression string) (Constraint, error) {
	field := Field(key)
	if problem := keyProblem(key); problem != "" {
		return Constraint{}, fielderr.New(ErrInvalidSelector, field, "%s", problem)
	}
	malformed := func(problem string) error {
		return fielderr.New(ErrInvalidSelector, field, "malformed selector value %q: %s", expression, problem)
	}
	constraint := Constraint{Key: key}
	body := expression
	if strings.HasPrefix(body, "!") {
		constraint.Negated = true
		body = body[1:]
	}
	if body == existsExpression {
		constraint.Exists = true
		return constraint, nil
	}
	if strings.HasPrefix(body, "in(") {
		if !strings.HasSuffix(body, ")") {
			return Constraint{}, malformed("in(...) is missing its closing parenthesis")
		}
		for _, value := range strings.Split(body[len("in("):len(body)-1], ",") {
			value = strings.TrimSpace(value)
			if problem := valueProblem(value); problem != "" {
				return Constraint{}, malformed(problem)
			}
			constraint.Values = append(constraint.Values, value)
		}
		return constraint, nil
	}
	if problem := valueProblem(body); problem != "" {
		return Constraint{}, malformed(problem)
	}
	constraint.Values = []string{body}
	return constraint, nil
}

// keyProblem applies Ray's key rules: an optional DNS-subdomain prefix and "/",
// then a name of at most 63 characters.
func keyProblem(key string) string {
	name := key
	if slash := strings.IndexByte(key, '/'); slash >= 0 {
		prefix := key[:slash]
		name = key[slash+1:]
		if !isPrefix(prefix) {
			return "invalid label key prefix " + strconv.Quote(prefix) +
				": must be DNS labels separated by dots, at most 253 characters"
		}
	}
	if !isName(name) {
		return "invalid label key name " + strconv.Quote(name) +
			": must be 1-63 characters, alphanumeric at both ends, with - _ . and alphanumerics between"
	}
	return ""
}

func valueProblem(value string) string {
	if value == "" {
		return "values must not be empty"
	}
	if !isName(value) {
		return "value " + strconv.Quote(value) +
			" must be at most 63 characters, alphanumeric at both ends, with - _ . and alphanumerics between"
	}
	return ""
}

func isPrefix(prefix string) bool {
	if prefix == "" || len(prefix) > maxPrefixBytes {
		return false
	}
	for _, part := range strings.Split(prefix, ".") {
		if !isName(part) {
			return false
		}
	}
	return true
}

// isName matches [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])? of at most 63 bytes.
func isName(s string) bool {
	if s == "" || len(s) > maxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alphanumeric := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alphanumeric {
			continue
		}
		if i == 0 || i == len(s)-1 || (c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}

// Field is the field path of one label key in a map: ["zone"].
func Field(key string) string { return "[" + strconv.Quote(key) + "]" }
