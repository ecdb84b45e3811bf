package placement

import (
	"slices"
	"strconv"
	"strings"
)

// NodeIDLabel is the label every Ray node carries with its own id as value. The caller
// building the Snapshot supplies it (NewSnapshot checks it, it does not invent it);
// a selector on it pins a bundle to a node.
const NodeIDLabel = "ray.io/node-id"

// Label syntax limits, as Ray's label_utils (Kubernetes-style keys and values).
const (
	maxLabelNameBytes   = 63
	maxLabelPrefixBytes = 253
)

// LabelConstraint is one entry of a label selector: the node's value of Key must be
// one of Values, or with Negated, the node must lack Key or have a value outside Values.
// Ray's forms map as: "a" → {Values: [a]}, "in(a,b)" → {Values: [a b]},
// "!a" → {Values: [a], Negated}, "!in(a,b)" → {Values: [a b], Negated}.
type LabelConstraint struct {
	Key     string
	Values  []string
	Negated bool
}

// Matches reports whether a node with these labels satisfies the constraint.
func (c LabelConstraint) Matches(labels map[string]string) bool {
	value, present := labels[c.Key]
	return (present && slices.Contains(c.Values, value)) != c.Negated
}

// Expression prints the constraint's value in Ray's syntax: "a", "in(a,b)", "!a", "!in(a,b)".
func (c LabelConstraint) Expression() string {
	expression := ""
	if c.Negated {
		expression = "!"
	}
	if len(c.Values) == 1 {
		return expression + c.Values[0]
	}
	return expression + "in(" + strings.Join(c.Values, ",") + ")"
}

// LabelSelector is a bundle's label selector: every constraint must match. Constraints
// are sorted by key. An empty selector matches every node.
type LabelSelector []LabelConstraint

// ParseLabelSelector parses one bundle's selector from the wire form (label key →
// expression). Errors name the key: `["zone"]: malformed selector value "in(a,)": ...`;
// callers prefix the field path (`bundle_label_selector[1]`).
func ParseLabelSelector(selector map[string]string) (LabelSelector, error) {
	if len(selector) == 0 {
		return nil, nil
	}
	parsed := make(LabelSelector, 0, len(selector))
	for _, key := range sortedKeys(selector) {
		constraint, err := parseLabelConstraint(key, selector[key])
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, constraint)
	}
	return parsed, nil
}

// Matches reports whether a node with these labels satisfies every constraint.
func (s LabelSelector) Matches(labels map[string]string) bool {
	_, mismatch := s.firstMismatch(labels)
	return !mismatch
}

// String prints the selector in the wire form: {ray.io/accelerator-type: in(A100,H100), zone: !b}.
func (s LabelSelector) String() string {
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

// firstMismatch returns the first constraint the labels fail, for rejection reasons.
func (s LabelSelector) firstMismatch(labels map[string]string) (LabelConstraint, bool) {
	for _, constraint := range s {
		if !constraint.Matches(labels) {
			return constraint, true
		}
	}
	return LabelConstraint{}, false
}

// check validates a selector built directly rather than parsed.
func (s LabelSelector) check() error {
	keys := make(map[string]bool, len(s))
	for _, constraint := range s {
		field := labelField(constraint.Key)
		if keys[constraint.Key] {
			return fieldErrorf(ErrInvalidLabelSelector, field, "label key appears more than once")
		}
		keys[constraint.Key] = true
		if problem := labelKeyProblem(constraint.Key); problem != "" {
			return fieldErrorf(ErrInvalidLabelSelector, field, "%s", problem)
		}
		if len(constraint.Values) == 0 {
			return fieldErrorf(ErrInvalidLabelSelector, field, "selector has no values")
		}
		for _, value := range constraint.Values {
			if problem := labelValueProblem(value); problem != "" {
				return fieldErrorf(ErrInvalidLabelSelector, field, "malformed selector value %q: %s", constraint.Expression(), problem)
			}
		}
	}
	return nil
}

func parseLabelConstraint(key, expression string) (LabelConstraint, error) {
	field := labelField(key)
	if problem := labelKeyProblem(key); problem != "" {
		return LabelConstraint{}, fieldErrorf(ErrInvalidLabelSelector, field, "%s", problem)
	}
	malformed := func(problem string) error {
		return fieldErrorf(ErrInvalidLabelSelector, field, "malformed selector value %q: %s", expression, problem)
	}
	constraint := LabelConstraint{Key: key}
	body := expression
	if strings.HasPrefix(body, "!") {
		constraint.Negated = true
		body = body[1:]
	}
	if strings.HasPrefix(body, "in(") {
		if !strings.HasSuffix(body, ")") {
			return LabelConstraint{}, malformed("in(...) is missing its closing parenthesis")
		}
		for _, value := range strings.Split(body[len("in("):len(body)-1], ",") {
			value = strings.TrimSpace(value)
			if problem := labelValueProblem(value); problem != "" {
				return LabelConstraint{}, malformed(problem)
			}
			constraint.Values = append(constraint.Values, value)
		}
		return constraint, nil
	}
	if problem := labelValueProblem(body); problem != "" {
		return LabelConstraint{}, malformed(problem)
	}
	constraint.Values = []string{body}
	return constraint, nil
}

// labelKeyProblem applies Ray's key rules: an optional DNS-subdomain prefix and "/",
// then a name of at most 63 characters.
func labelKeyProblem(key string) string {
	name := key
	if slash := strings.IndexByte(key, '/'); slash >= 0 {
		prefix := key[:slash]
		name = key[slash+1:]
		if !isLabelPrefix(prefix) {
			return "invalid label key prefix " + strconv.Quote(prefix) +
				": must be DNS labels separated by dots, at most 253 characters"
		}
	}
	if !isLabelName(name) {
		return "invalid label key name " + strconv.Quote(name) +
			": must be 1-63 characters, alphanumeric at both ends, with - _ . and alphanumerics between"
	}
	return ""
}

func labelValueProblem(value string) string {
	if value == "" {
		return "values must not be empty"
	}
	if !isLabelName(value) {
		return "value " + strconv.Quote(value) +
			" must be at most 63 characters, alphanumeric at both ends, with - _ . and alphanumerics between"
	}
	return ""
}

func isLabelPrefix(prefix string) bool {
	if prefix == "" || len(prefix) > maxLabelPrefixBytes {
		return false
	}
	for _, part := range strings.Split(prefix, ".") {
		if !isLabelName(part) {
			return false
		}
	}
	return true
}

// isLabelName matches [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])? of at most 63 bytes.
func isLabelName(s string) bool {
	if s == "" || len(s) > maxLabelNameBytes {
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

func labelField(key string) string { return "[" + strconv.Quote(key) + "]" }
