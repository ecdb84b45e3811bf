package stateapi

import (
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Ray's limits on a listing (ray/util/state/common.py: DEFAULT_LIMIT and
// RAY_MAX_LIMIT_FROM_API_SERVER's default).
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// Reply is the envelope of every answer of Ray's dashboard (dashboard/routes.py
// rest_response): result is whether the call succeeded, msg the error message, data the
// payload. The state API puts its ListResult in data.result; a refused call has
// data.result null.
type Reply struct {
	Result bool           `json:"result"`
	Msg    string         `json:"msg"`
	Data   map[string]any `json:"data"`
}

// OK is a successful reply holding result in data.result.
func OK(result any) Reply { return Reply{Result: true, Data: map[string]any{"result": result}} }

// Refused is a failed reply with msg.
func Refused(msg string) Reply { return Reply{Msg: msg, Data: map[string]any{"result": nil}} }

// ListResult is Ray's ListApiResponse: total rows, those left after truncation at the
// source (raygo truncates nothing there), those that passed the filters, and the rows
// returned (at most the limit).
type ListResult struct {
	Total                 int      `json:"total"`
	NumAfterTruncation    int      `json:"num_after_truncation"`
	NumFiltered           int      `json:"num_filtered"`
	Result                []any    `json:"result"`
	PartialFailureWarning string   `json:"partial_failure_warning"`
	Warnings              []string `json:"warnings"`
}

// Filter is one of Ray's list filters: the rows whose column equals (=) or differs
// from (!=) the value.
type Filter struct {
	Column, Predicate, Value string
}

// ListOptions are the query parameters of a listing that raygo reads, as Ray's
// dashboard names them: limit, filter_keys, filter_predicates and filter_values
// (repeated, matched by position), and detail (Columns).
type ListOptions struct {
	Limit   int
	Filters []Filter
	Columns Columns
}

// ParseListOptions reads a listing's query. Ray's other parameters (timeout,
// exclude_driver) are accepted and ignored: raygo's rows come from the GCS's memory,
// and it has no drivers' rows to exclude.
func ParseListOptions(query url.Values) (ListOptions, error) {
	options := ListOptions{Limit: DefaultLimit}
	columns, err := ParseColumns(query.Get("detail"))
	if err != nil {
		return options, err
	}
	options.Columns = columns
	if raw := query.Get("limit"); raw != "" {
		limit, err := strconv.Atoi(raw)
		if err != nil || limit < 0 {
			return options, fmt.Errorf("limit %q: must be a whole number from 0 to %d", raw, MaxLimit)
		}
		if limit > MaxLimit {
			return options, fmt.Errorf("given limit %d exceeds the supported limit %d: use a lower limit", limit, MaxLimit)
		}
		options.Limit = limit
	}
	keys, predicates, values := query["filter_keys"], query["filter_predicates"], query["filter_values"]
	if len(keys) != len(values) || len(keys) != len(predicates) {
		return options, fmt.Errorf("filter_keys (%d), filter_predicates (%d) and filter_values (%d) must come in threes", len(keys), len(predicates), len(values))
	}
	for i, key := range keys {
		if predicates[i] != "=" && predicates[i] != "!=" {
			return options, fmt.Errorf("filter_predicates %q for %s: must be = or !=", predicates[i], key)
		}
		options.Filters = append(options.Filters, Filter{Column: strings.ToLower(key), Predicate: predicates[i], Value: values[i]})
	}
	return options, nil
}

// List filters rows, cuts them to the limit and keeps the columns options ask for
// (Project), as Ray's state API does. A filter may name any top-level field of raygo's
// row T whose value is a string, a number or a boolean, whichever columns are returned
// (another column is refused whether or not there are rows); strings compare without
// case, as Ray's.
func List[T any](rows []T, options ListOptions) (ListResult, error) {
	result := ListResult{Total: len(rows), NumAfterTruncation: len(rows), Result: []any{}}
	var kept []T
	columns := filterColumns(reflect.TypeFor[T]())
	for _, f := range options.Filters {
		if _, ok := columns[f.Column]; !ok {
			return result, fmt.Errorf("the given filter column %s is not supported: supported filter columns: %s", f.Column, strings.Join(slices.Sorted(maps.Keys(columns)), ", "))
		}
	}
	for _, row := range rows {
		value := reflect.ValueOf(row)
		keep := true
		for _, f := range options.Filters {
			if matches(value.Field(columns[f.Column]), f.Value) != (f.Predicate == "=") {
				keep = false
				break
			}
		}
		if !keep {
			continue
		}
		result.NumFiltered++
		if len(kept) < options.Limit {
			kept = append(kept, row)
		}
	}
	projected, err := Project(kept, options.Columns)
	if err != nil {
		return result, err
	}
	result.Result = append(result.Result, projected...)
	if result.NumFiltered > options.Limit {
		result.Warnings = []string{fmt.Sprintf("%d (> %d) rows matched; %d are returned: raise limit to see more", result.NumFiltered, options.Limit, options.Limit)}
	}
	return result, nil
}

// filterColumns maps the JSON names of a row type's scalar fields (strings, numbers,
// booleans) to their field index.
func filterColumns(row reflect.Type) map[string]int {
	columns := map[string]int{}
	for i := range row.NumField() {
		field := row.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch field.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			columns[name] = i
		}
	}
	return columns
}

// matches compares a row's value with a filter's text: strings without case, numbers
// and booleans after parsing the text (a text that does not parse matches nothing).
func matches(value reflect.Value, text string) bool {
	switch value.Kind() {
	case reflect.String:
		return strings.EqualFold(value.String(), text)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		return err == nil && b == value.Bool()
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, 64)
		return err == nil && n == value.Int()
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(text, 10, 64)
		return err == nil && n == value.Uint()
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(text, 64)
		return err == nil && f == value.Float()
	}
	return false
}
