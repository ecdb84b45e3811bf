package stateapi

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// keysInOrder returns the keys of a JSON object in the order written.
func keysInOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	decoder := json.NewDecoder(strings.NewReader(string(raw)))
	if token, err := decoder.Token(); err != nil || token != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for decoder.More() {
		token, err := decoder.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, token.(string))
		var skip json.RawMessage
		if err := decoder.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// detail=false lists Ray's base columns and detail=true every column of Ray's schema,
// in its order and nothing else (Ray's client refuses a row with a column it does not
// know); detail=all lists raygo's rows whole. A column raygo has no value for is null.
func TestDetailSelectsRaysColumns(t *testing.T) {
	node := FromNode(&pb.NodeInfo{NodeId: "n", State: pb.NodeState_ALIVE, StartTimeMs: 5, Gpus: []*pb.GPUInfo{{Index: 0}}})
	group := FromPlacementGroup(&pb.PlacementGroupInfo{PlacementGroupId: "g", Name: "train", Queue: "team-a", PendingReasonCode: "Fragmented"})
	actor := FromActor(&pb.ActorInfo{ActorId: "a", ClassName: "Counter", NumRestarts: 2})
	job := FromJob(&pb.JobInfo{JobId: "01000000", DriverIp: "127.0.0.1", DriverPid: 42, StartTimeMs: 7})
	for _, tc := range []struct {
		name, detail string
		row          []any
		want         []string
	}{
		{"node", "", []any{node}, []string{"node_id", "node_ip", "is_head_node", "state", "state_message", "node_name", "resources_total", "labels"}},
		{"node", "true", []any{node}, []string{"node_id", "node_ip", "is_head_node", "state", "state_message", "node_name", "resources_total", "labels", "start_time_ms", "end_time_ms"}},
		{"placement group", "False", []any{group}, []string{"placement_group_id", "name", "creator_job_id", "state"}},
		{"placement group", "1", []any{group}, []string{"placement_group_id", "name", "creator_job_id", "state", "bundles", "is_detached", "stats", "topology_strategy", "topology_assignments"}},
		{"actor", "0", []any{actor}, []string{"actor_id", "class_name", "state", "job_id", "name", "node_id", "pid", "ray_namespace"}},
		{"actor", "True", []any{actor}, []string{"actor_id", "class_name", "state", "job_id", "name", "node_id", "pid", "ray_namespace",
			"serialized_runtime_env", "required_resources", "death_cause", "is_detached", "placement_group_id", "repr_name", "num_restarts",
			"num_restarts_due_to_lineage_reconstruction", "num_restarts_due_to_node_preemption", "call_site", "label_selector", "fallback_strategy"}},
		{"job", "", []any{job}, []string{"job_id", "submission_id", "type", "status", "entrypoint", "message", "error_type", "driver_info"}},
		{"job", "true", []any{job}, []string{"job_id", "submission_id", "type", "status", "entrypoint", "message", "error_type", "start_time", "end_time",
			"metadata", "runtime_env", "driver_info", "driver_agent_http_address", "driver_node_id", "driver_exit_code"}},
	} {
		t.Run(tc.name+" detail="+tc.detail, func(t *testing.T) {
			options, err := ParseListOptions(url.Values{"detail": {tc.detail}})
			if err != nil {
				t.Fatal(err)
			}
			var listed ListResult
			switch row := tc.row[0].(type) {
			case Node:
				listed, err = List([]Node{row}, options)
			case PlacementGroup:
				listed, err = List([]PlacementGroup{row}, options)
			case Actor:
				listed, err = List([]Actor{row}, options)
			case Job:
				listed, err = List([]Job{row}, options)
			}
			if err != nil || len(listed.Result) != 1 {
				t.Fatalf("%v, %d rows", err, len(listed.Result))
			}
			raw, err := json.Marshal(listed.Result[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := keysInOrder(t, raw); !slices.Equal(got, tc.want) {
				t.Fatalf("columns %v, want %v (%s)", got, tc.want, raw)
			}
		})
	}
	// Values are raygo's, and null where raygo has none.
	listed, _ := List([]Actor{actor}, ListOptions{Limit: 1, Columns: RayDetail})
	raw, _ := json.Marshal(listed.Result[0])
	if !strings.Contains(string(raw), `"num_restarts":2`) || !strings.Contains(string(raw), `"repr_name":null`) {
		t.Errorf("actor row %s: want num_restarts 2 and repr_name null", raw)
	}
	// detail=all: raygo's whole rows; a filter may name a raygo column in every mode.
	for _, detail := range []string{"all", "false"} {
		options, _ := ParseListOptions(url.Values{"detail": {detail}, "filter_keys": {"pending_reason_code"}, "filter_predicates": {"="}, "filter_values": {"fragmented"}})
		listed, err := List([]PlacementGroup{group}, options)
		if err != nil || listed.NumFiltered != 1 {
			t.Fatalf("detail=%s with a filter on pending_reason_code: %v, %d filtered", detail, err, listed.NumFiltered)
		}
		raw, _ := json.Marshal(listed.Result[0])
		if has := strings.Contains(string(raw), `"queue":"team-a"`); has != (detail == "all") {
			t.Errorf("detail=%s: %s", detail, raw)
		}
	}
	if _, err := ParseListOptions(url.Values{"detail": {"yes"}}); err == nil || !strings.Contains(err.Error(), "must be true, false or all") {
		t.Errorf("detail=yes: %v", err)
	}
}
