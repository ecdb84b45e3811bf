package clusterconfig

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// ErrInvalidConfig is the sentinel of every problem found in the cluster YAML itself
// (types, unknown keys, ranges, references between keys). Problems found by the shared
// checks keep their own sentinels (resources.ErrInvalidAmount, nodelabel.ErrInvalidLabel).
// It wraps fielderr.ErrInvalid.
var ErrInvalidConfig = fmt.Errorf("%w: invalid cluster config", fielderr.ErrInvalid)

// Errors is every problem found in one cluster config, sorted by field then message,
// duplicates dropped. Error() puts one problem per line, `field.path: message`.
// errors.Is and errors.As see each problem.
type Errors []*fielderr.Error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, problem := range e {
		lines[i] = problem.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so errors.Is(err, ErrInvalidConfig) holds when any does.
func (e Errors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, problem := range e {
		errs[i] = problem
	}
	return errs
}

// problems collects what a decode or a validation finds, to report every problem at once.
type problems []*fielderr.Error

func (p *problems) addf(field, format string, args ...any) {
	*p = append(*p, fielderr.New(ErrInvalidConfig, field, format, args...))
}

// addShared records a problem found by a shared check (resources, nodelabel) under
// field: the check's own field path (`["GPU"]`) is replaced by ours, its message and
// sentinel are kept.
func (p *problems) addShared(field string, err error) {
	var fieldErr *fielderr.Error
	if !errors.As(err, &fieldErr) {
		*p = append(*p, fielderr.New(ErrInvalidConfig, field, "%v", err))
		return
	}
	*p = append(*p, &fielderr.Error{Field: field, Problem: fieldErr.Problem, Err: fieldErr.Err})
}

// result is nil when nothing was found, else the sorted, deduplicated Errors.
func (p problems) result() error {
	if len(p) == 0 {
		return nil
	}
	sorted := slices.Clone(p)
	slices.SortStableFunc(sorted, func(a, b *fielderr.Error) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Problem, b.Problem))
	})
	sorted = slices.CompactFunc(sorted, func(a, b *fielderr.Error) bool {
		return a.Field == b.Field && a.Problem == b.Problem
	})
	return Errors(sorted)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// join is the field path of key under parent, in the YAML's own names:
// `available_node_types.gpu.resources.GPU`. A key that is not a plain word (a node type
// "ray.head.default", a label "topology.raygo.io/rack") is quoted in brackets:
// `available_node_types["ray.head.default"].min_workers`.
func join(parent, key string) string {
	if !plainKey.MatchString(key) {
		const maxShown = 60
		if len(key) > maxShown {
			key = key[:maxShown] + "…"
		}
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }
