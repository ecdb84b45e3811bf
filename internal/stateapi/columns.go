package stateapi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Columns is which columns a listing's rows carry: Ray's state API query parameter
// detail. Ray's server keeps exactly its schema's columns (ray/util/state/common.py
// filter_fields; a column its data lacks is null), and Ray's client builds a dataclass
// from each row, refusing one with a column it does not know: rows for Ray's client carry
// no raygo column.
type Columns int

const (
	// RayBase (detail=false, Ray's default): the columns of Ray's schema not marked
	// detail, e.g. a node's node_id, node_ip, is_head_node, state, state_message,
	// node_name, resources_total and labels.
	RayBase Columns = iota
	// RayDetail (detail=true): every column of Ray's schema.
	RayDetail
	// Every (detail=all, raygo's): every field of raygo's row, its additions (GPUs, MIG
	// instances and their activity, pending reason codes, queue, ...) included, and
	// none of Ray's columns raygo has no value for. The dashboard page, raygo list
	// --format json and the Python client read these.
	Every
)

// ParseColumns reads a detail parameter: Ray's booleans (false, False, 0, true, True, 1,
// as ray/util/state/util.py convert_string_to_type; "" is false) or raygo's "all".
func ParseColumns(detail string) (Columns, error) {
	switch detail {
	case "", "false", "False", "0":
		return RayBase, nil
	case "true", "True", "1":
		return RayDetail, nil
	case "all":
		return Every, nil
	}
	return RayBase, fmt.Errorf("detail %q: must be true, false or all", detail)
}

// String is the detail parameter that selects c.
func (c Columns) String() string {
	switch c {
	case RayDetail:
		return "true"
	case Every:
		return "all"
	}
	return "false"
}

// rayColumn is one column of Ray's schema for a row type; detail: Ray returns it only
// with detail=true (state_column(detail=True)).
type rayColumn struct {
	name   string
	detail bool
}

// rayRow is a row type with a Ray schema: its columns, in the schema's order.
type rayRow interface {
	rayColumns() []rayColumn
}

// Ray 2.60's NodeState, PlacementGroupState, ActorState and JobState.
var (
	nodeColumns = []rayColumn{{"node_id", false}, {"node_ip", false}, {"is_head_node", false}, {"state", false},
		{"state_message", false}, {"node_name", false}, {"resources_total", false}, {"labels", false},
		{"start_time_ms", true}, {"end_time_ms", true}}
	placementGroupColumns = []rayColumn{{"placement_group_id", false}, {"name", false}, {"creator_job_id", false}, {"state", false},
		{"bundles", true}, {"is_detached", true}, {"stats", true}, {"topology_strategy", true}, {"topology_assignments", true}}
	actorColumns = []rayColumn{{"actor_id", false}, {"class_name", false}, {"state", false}, {"job_id", false},
		{"name", false}, {"node_id", false}, {"pid", false}, {"ray_namespace", false},
		{"serialized_runtime_env", true}, {"required_resources", true}, {"death_cause", true}, {"is_detached", true},
		{"placement_group_id", true}, {"repr_name", true}, {"num_restarts", true},
		{"num_restarts_due_to_lineage_reconstruction", true}, {"num_restarts_due_to_node_preemption", true},
		{"call_site", true}, {"label_selector", true}, {"fallback_strategy", true}}
	// JobState's columns are JobDetails' (its base ones listed by JobState.list_columns).
	jobColumns = []rayColumn{{"job_id", false}, {"submission_id", false}, {"type", false}, {"status", false},
		{"entrypoint", false}, {"message", false}, {"error_type", false}, {"start_time", true}, {"end_time", true},
		{"metadata", true}, {"runtime_env", true}, {"driver_info", false}, {"driver_agent_http_address", true},
		{"driver_node_id", true}, {"driver_exit_code", true}}
)

func (Node) rayColumns() []rayColumn           { return nodeColumns }
func (PlacementGroup) rayColumns() []rayColumn { return placementGroupColumns }
func (Actor) rayColumns() []rayColumn          { return actorColumns }
func (Job) rayColumns() []rayColumn            { return jobColumns }

var _, _, _, _ rayRow = Node{}, PlacementGroup{}, Actor{}, Job{}

// Project returns the rows with the columns asked: each row itself for Every, else a
// JSON object of Ray's columns in the schema's order (null where raygo has no value).
// A row type without a Ray schema keeps every field.
func Project[T any](rows []T, columns Columns) ([]any, error) {
	out := make([]any, len(rows))
	for i, row := range rows {
		schema, ok := any(row).(rayRow)
		if columns == Every || !ok {
			out[i] = row
			continue
		}
		projected, err := projectRow(row, schema.rayColumns(), columns == RayDetail)
		if err != nil {
			return nil, err
		}
		out[i] = projected
	}
	return out, nil
}

// projectRow writes row's values of columns (detail ones only with detail) as one JSON
// object, in the columns' order.
func projectRow(row any, columns []rayColumn, detail bool) (json.RawMessage, error) {
	raw, err := json.Marshal(row)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, column := range columns {
		if column.detail && !detail {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(column.name)
		b.Write(name)
		b.WriteByte(':')
		if value, ok := fields[column.name]; ok {
			b.Write(value)
		} else {
			b.WriteString("null")
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
