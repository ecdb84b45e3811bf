package stateapi

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

func TestListFiltersAndLimitsAsRay(t *testing.T) {
	rows := []Node{
		{NodeID: "a", State: "ALIVE", IsHeadNode: true},
		{NodeID: "b", State: "ALIVE"},
		{NodeID: "c", State: "DEAD"},
	}
	for _, tc := range []struct {
		query            string
		filtered, listed int
	}{
		{"", 3, 3},
		{"limit=1", 3, 1},
		{"filter_keys=state&filter_predicates==&filter_values=alive", 2, 2},
		{"filter_keys=state&filter_predicates=!%3D&filter_values=ALIVE", 1, 1},
		{"filter_keys=is_head_node&filter_predicates==&filter_values=true&limit=5", 1, 1},
	} {
		query, _ := url.ParseQuery(tc.query)
		options, err := ParseListOptions(query)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		got, err := List(rows, options)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if got.Total != 3 || got.NumAfterTruncation != 3 || got.NumFiltered != tc.filtered || len(got.Result) != tc.listed {
			t.Errorf("%q: total %d, after truncation %d, filtered %d, listed %d; want 3, 3, %d, %d",
				tc.query, got.Total, got.NumAfterTruncation, got.NumFiltered, len(got.Result), tc.filtered, tc.listed)
		}
	}
}

func TestListRefusesWhatRayRefuses(t *testing.T) {
	for query, want := range map[string]string{
		"limit=10001":                           "exceeds the supported limit 10000",
		"limit=x":                               "limit",
		"filter_keys=state&filter_values=ALIVE": "must come in threes",
		"filter_keys=state&filter_predicates=~&filter_values=A": "must be = or !=",
	} {
		values, _ := url.ParseQuery(query)
		if _, err := ParseListOptions(values); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", query, err, want)
		}
	}
	options, _ := ParseListOptions(url.Values{"filter_keys": {"gpus"}, "filter_predicates": {"="}, "filter_values": {"x"}})
	if _, err := List([]Node{}, options); err == nil || !strings.Contains(err.Error(), "node_id") {
		t.Errorf("a filter on a list column (no rows): %v, want an error listing the columns", err)
	}
}

// The envelope is Ray's rest_response with a ListApiResponse in data.result.
func TestReplyEnvelope(t *testing.T) {
	listed, _ := List([]Node{{NodeID: "a"}}, ListOptions{Limit: DefaultLimit})
	raw, _ := json.Marshal(OK(listed))
	var got struct {
		Result bool   `json:"result"`
		Msg    string `json:"msg"`
		Data   struct {
			Result map[string]json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || !got.Result || got.Msg != "" {
		t.Fatalf("%s: %v", raw, err)
	}
	for _, field := range []string{"total", "num_after_truncation", "num_filtered", "result", "partial_failure_warning", "warnings"} {
		if _, ok := got.Data.Result[field]; !ok {
			t.Errorf("data.result has no %s: %s", field, raw)
		}
	}
	raw, _ = json.Marshal(Refused("no"))
	if string(raw) != `{"result":false,"msg":"no","data":{"result":null}}` {
		t.Errorf("refused: %s", raw)
	}
}
