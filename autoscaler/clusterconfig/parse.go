package clusterconfig

import (
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads and parses the cluster YAML at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	return Parse(data)
}

// Parse reads a cluster YAML: the keys of Ray 2.60's ray-schema.json, with the defaults
// of Ray's defaults.yaml for the keys left out, then validates it (Validate). A key
// Ray's schema does not know is an error, except under provider (open, as in Ray's
// schema) where only provider.raygo is strict. On failure the error is Errors, every
// problem found, and the Config is nil.
func Parse(data []byte) (*Config, error) {
	var document any
	if err := yaml.Unmarshal(data, &document); err != nil {
		var found problems
		found.addf("", "not a valid YAML document: %s", oneLine(err.Error()))
		return nil, found.result()
	}
	d := decoder{config: DefaultConfig()}
	if d.top(document) {
		d.config.validate(&d.found)
	}
	if err := d.found.result(); err != nil {
		return nil, err
	}
	slices.Sort(d.config.Ignored)
	return d.config, nil
}

var spaces = regexp.MustCompile(`\s*\n\s*`)

// oneLine keeps yaml's multi-line messages ("unmarshal errors:\n  line 3: …") on one line.
func oneLine(message string) string { return spaces.ReplaceAllString(message, " ") }

// decoder fills a Config from the decoded YAML and records type problems and unknown
// keys; ranges and references are Validate's.
type decoder struct {
	config *Config
	found  problems
}

// The keys of Ray's schema, by what raygo does with them. Ignored keys are accepted and
// listed in Config.Ignored when set; the value given is the JSON type Ray's schema asks
// for, checked so that a file raygo accepts is one `ray up` accepts.
var (
	topLevelKeys = []string{
		"cluster_name", "max_workers", "upscaling_speed", "idle_timeout_minutes", "provider",
		"head_node_type", "available_node_types", "initialization_commands", "setup_commands",
		"head_setup_commands", "worker_setup_commands",
	}
	topLevelIgnored = map[string]string{
		"auth": "object", "docker": "object", "file_mounts": "object", "metadata": "object",
		"cluster_synced_files": "array", "rsync_exclude": "array", "rsync_filter": "array",
		"file_mounts_sync_continuously": "boolean", "no_restart": "any",
		"head_start_ray_commands": "commands", "worker_start_ray_commands": "commands",
	}
	nodeTypeKeys = []string{
		"node_config", "resources", "min_workers", "max_workers", "idle_timeout_s", "priority",
		"labels", "initialization_commands", "worker_setup_commands",
	}
	nodeTypeIgnored   = map[string]string{"docker": "object"}
	raygoKeys         = []string{"node_types", "disruption"}
	raygoNodeTypeKeys = []string{"price_per_hour", "gpu_model", "nvlink_islands", "scalable_unit", "rack", "expected_launch_s"}
	disruptionKeys    = []string{"max_unavailable"}
)

// top decodes the document; false when it is not a mapping (nothing else to check).
func (d *decoder) top(document any) bool {
	if document == nil {
		document = map[string]any{} // an empty file: report the required keys
	}
	top, ok := d.mapping("", document)
	if !ok {
		return false
	}
	d.checkKeys("", top, topLevelKeys, topLevelIgnored)
	c := d.config
	if v, ok := top["cluster_name"]; ok {
		c.ClusterName, _ = d.str("cluster_name", v)
	} else {
		d.found.addf("cluster_name", "is required")
	}
	if v, ok := top["max_workers"]; ok {
		if n, ok := d.integer("max_workers", v, "must be an integer >= 0"); ok {
			c.MaxWorkers = n
		}
	}
	if v, ok := top["upscaling_speed"]; ok {
		if x, ok := d.number("upscaling_speed", v); ok {
			c.UpscalingSpeed = x
		}
	}
	if v, ok := top["idle_timeout_minutes"]; ok {
		c.IdleTimeout, _ = d.duration("idle_timeout_minutes", v, time.Minute)
	}
	if v, ok := top["head_node_type"]; ok {
		c.HeadNodeType, _ = d.str("head_node_type", v)
	}
	if v, ok := top["provider"]; ok {
		d.provider(v)
	} else {
		d.found.addf("provider", "is required")
	}
	c.InitializationCommands = d.commands("initialization_commands", top["initialization_commands"])
	c.SetupCommands = d.commands("setup_commands", top["setup_commands"])
	c.HeadSetupCommands = d.commands("head_setup_commands", top["head_setup_commands"])
	c.WorkerSetupCommands = d.commands("worker_setup_commands", top["worker_setup_commands"])
	if v, ok := top["available_node_types"]; ok {
		if nodeTypes, ok := d.mapping("available_node_types", v); ok {
			for _, name := range slices.Sorted(maps.Keys(nodeTypes)) {
				c.NodeTypes[name] = d.nodeType(name, nodeTypes[name])
			}
		}
	}
	return true
}

func (d *decoder) provider(v any) {
	provider, ok := d.mapping("provider", v)
	if !ok {
		return
	}
	p := &d.config.Provider
	p.Settings = map[string]any{}
	for key, value := range provider {
		if key != "raygo" {
			p.Settings[key] = value
		}
	}
	if v, ok := provider["type"]; ok {
		p.Type, _ = d.str("provider.type", v)
	} else {
		d.found.addf("provider.type", "is required")
	}
	if v, ok := provider["region"]; ok {
		p.Region, _ = d.str("provider.region", v)
	}
	raygoValue, ok := provider["raygo"]
	if !ok {
		return
	}
	raygo, ok := d.mapping("provider.raygo", raygoValue)
	if !ok {
		return
	}
	d.checkKeys("provider.raygo", raygo, raygoKeys, nil)
	if v, ok := raygo["node_types"]; ok {
		if nodeTypes, ok := d.mapping(raygoNodeTypesPath, v); ok {
			p.Raygo.NodeTypes = map[string]RaygoNodeType{}
			for _, name := range slices.Sorted(maps.Keys(nodeTypes)) {
				p.Raygo.NodeTypes[name] = d.raygoNodeType(name, nodeTypes[name])
			}
		}
	}
	if v, ok := raygo["disruption"]; ok {
		if disruption, ok := d.mapping("provider.raygo.disruption", v); ok {
			d.checkKeys("provider.raygo.disruption", disruption, disruptionKeys, nil)
			if v, ok := disruption["max_unavailable"]; ok {
				p.Raygo.MaxUnavailable = d.maxUnavailable(v)
			}
		}
	}
}

func (d *decoder) maxUnavailable(v any) MaxUnavailable {
	if text, ok := v.(string); ok && strings.HasSuffix(text, "%") {
		if m, err := ParseMaxUnavailable(text); err == nil {
			return m
		}
	} else if n, ok := integerValue(v); ok && n >= 1 {
		return MaxUnavailable{Nodes: n}
	}
	d.found.addf(maxUnavailablePath, "%s", maxUnavailableProblem)
	return DefaultMaxUnavailable
}

func (d *decoder) nodeType(name string, v any) NodeTypeConfig {
	path := join("available_node_types", name)
	// Ray's default: the cluster's max_workers (reported itself when negative).
	nodeType := NodeTypeConfig{MaxWorkers: max(d.config.MaxWorkers, 0)}
	fields, ok := d.mapping(path, v)
	if !ok {
		return nodeType
	}
	d.checkKeys(path, fields, nodeTypeKeys, nodeTypeIgnored)
	if v, ok := fields["node_config"]; ok {
		nodeType.NodeConfig, _ = d.mapping(join(path, "node_config"), v)
	} else {
		d.found.addf(join(path, "node_config"), "is required")
	}
	if v, ok := fields["resources"]; ok {
		resourcesPath := join(path, "resources")
		if amounts, ok := d.mapping(resourcesPath, v); ok {
			nodeType.Resources = map[string]int64{}
			for _, resource := range slices.Sorted(maps.Keys(amounts)) {
				if amount, ok := int64Value(amounts[resource]); ok {
					nodeType.Resources[resource] = amount
				} else {
					d.found.addf(join(resourcesPath, resource), "must be an integer >= 0")
				}
			}
		}
	} else {
		d.found.addf(join(path, "resources"), "is required")
	}
	if v, ok := fields["min_workers"]; ok {
		nodeType.MinWorkers, _ = d.integer(join(path, "min_workers"), v, "must be an integer >= 0")
	}
	if v, ok := fields["max_workers"]; ok {
		if n, ok := d.integer(join(path, "max_workers"), v, "must be an integer >= 0"); ok {
			nodeType.MaxWorkers = n
		}
	} else if name == d.config.HeadNodeType {
		nodeType.MaxWorkers = 0 // Ray's default for the head's type
	}
	if v, ok := fields["idle_timeout_s"]; ok && v != nil { // null: Ray's schema says nullable
		if timeout, ok := d.duration(join(path, "idle_timeout_s"), v, time.Second); ok {
			nodeType.IdleTimeout = &timeout
		}
	}
	if v, ok := fields["priority"]; ok {
		nodeType.Priority, _ = d.integer(join(path, "priority"), v, "must be an integer")
	}
	if v, ok := fields["labels"]; ok {
		labelsPath := join(path, "labels")
		if labels, ok := d.mapping(labelsPath, v); ok {
			nodeType.Labels = map[string]string{}
			for _, key := range slices.Sorted(maps.Keys(labels)) {
				if value, ok := d.str(join(labelsPath, key), labels[key]); ok {
					nodeType.Labels[key] = value
				}
			}
		}
	}
	nodeType.InitializationCommands = d.commands(join(path, "initialization_commands"), fields["initialization_commands"])
	nodeType.WorkerSetupCommands = d.commands(join(path, "worker_setup_commands"), fields["worker_setup_commands"])
	return nodeType
}

func (d *decoder) raygoNodeType(name string, v any) RaygoNodeType {
	path := join(raygoNodeTypesPath, name)
	var settings RaygoNodeType
	fields, ok := d.mapping(path, v)
	if !ok {
		return settings
	}
	d.checkKeys(path, fields, raygoNodeTypeKeys, nil)
	if v, ok := fields["price_per_hour"]; ok {
		settings.PricePerHour, _ = d.number(join(path, "price_per_hour"), v)
	}
	if v, ok := fields["gpu_model"]; ok {
		settings.GPUModel, _ = d.str(join(path, "gpu_model"), v)
	}
	if v, ok := fields["nvlink_islands"]; ok {
		islandsPath := join(path, "nvlink_islands")
		if list, ok := v.([]any); ok && len(list) > 0 {
			for i, item := range list {
				size, _ := d.integer(index(islandsPath, i), item, "must be an integer >= 1")
				settings.NVLinkIslands = append(settings.NVLinkIslands, size)
			}
		} else {
			d.found.addf(islandsPath, "must be a non-empty list of island sizes in GPUs")
		}
	}
	if v, ok := fields["scalable_unit"]; ok {
		settings.ScalableUnit, _ = d.str(join(path, "scalable_unit"), v)
	}
	if v, ok := fields["rack"]; ok {
		settings.Rack, _ = d.str(join(path, "rack"), v)
	}
	if v, ok := fields["expected_launch_s"]; ok {
		settings.ExpectedLaunch, _ = d.duration(join(path, "expected_launch_s"), v, time.Second)
	}
	return settings
}

// checkKeys reports every key of m that is neither honoured nor ignored, and lists the
// ignored ones that are set (after checking their JSON type).
func (d *decoder) checkKeys(path string, m map[string]any, honoured []string, ignored map[string]string) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		field := join(path, key)
		if slices.Contains(honoured, key) {
			continue
		}
		if kind, ok := ignored[key]; ok {
			if d.checkKind(field, m[key], kind) && !isEmpty(m[key]) {
				d.config.Ignored = append(d.config.Ignored, field)
			}
			continue
		}
		allowed := append(slices.Clone(honoured), slices.Collect(maps.Keys(ignored))...)
		slices.Sort(allowed)
		d.found.addf(field, "unknown key (allowed: %s)", strings.Join(allowed, ", "))
	}
}

// checkKind checks an ignored key's value against the JSON type Ray's schema gives it.
func (d *decoder) checkKind(field string, v any, kind string) bool {
	switch kind {
	case "object":
		_, ok := d.mapping(field, v)
		return ok
	case "array":
		if _, ok := v.([]any); !ok {
			d.found.addf(field, "must be a list")
			return false
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			d.found.addf(field, "must be true or false")
			return false
		}
	case "commands":
		d.commands(field, v)
	}
	return true
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	case map[any]any:
		return len(v) == 0
	}
	return false
}

// mapping is v as a mapping with string keys, or a recorded problem.
func (d *decoder) mapping(field string, v any) (map[string]any, bool) {
	switch v := v.(type) {
	case map[string]any:
		return v, true
	case map[any]any:
		m := make(map[string]any, len(v))
		for key, value := range v {
			text, ok := key.(string)
			if !ok {
				d.found.addf(field, "keys must be strings, got %v", key)
				return nil, false
			}
			m[text] = value
		}
		return m, true
	}
	if field == "" {
		d.found.addf("", "the cluster config must be a YAML mapping, got %s", kindOf(v))
	} else {
		d.found.addf(field, "must be a mapping, got %s", kindOf(v))
	}
	return nil, false
}

func (d *decoder) str(field string, v any) (string, bool) {
	text, ok := v.(string)
	if !ok {
		d.found.addf(field, "must be a string, got %s", kindOf(v))
	}
	return text, ok
}

// integer reads a YAML integer (or a float with no fraction, which Ray's JSON schema
// also takes as an integer) that fits an int; the range is Validate's, with the same
// problem text.
func (d *decoder) integer(field string, v any, problem string) (int, bool) {
	n, ok := integerValue(v)
	if !ok {
		d.found.addf(field, "%s", problem)
	}
	return n, ok
}

func integerValue(v any) (int, bool) {
	n, ok := int64Value(v)
	if !ok || n > math.MaxInt32 || n < math.MinInt32 {
		return 0, false
	}
	return int(n), true
}

// int64Value is v as an int64 when it is a whole number in range.
func int64Value(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true
		}
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<62 {
			return int64(v), true
		}
	}
	return 0, false
}

// number reads a YAML number that is finite and >= 0 (every number key of the schema
// raygo reads has minimum 0).
func (d *decoder) number(field string, v any) (float64, bool) {
	var x float64
	switch v := v.(type) {
	case int:
		x = float64(v)
	case int64:
		x = float64(v)
	case uint64:
		x = float64(v)
	case float64:
		x = v
	default:
		d.found.addf(field, "must be a number >= 0")
		return 0, false
	}
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		d.found.addf(field, "must be a number >= 0")
		return 0, false
	}
	return x, true
}

// maxDuration bounds the durations a file may give: ten years is past any timeout, and
// keeps time.Duration (about 292 years) from overflowing.
const maxDuration = 10 * 365 * 24 * time.Hour

// duration reads a number of units (seconds, minutes) >= 0 as a time.Duration.
func (d *decoder) duration(field string, v any, unit time.Duration) (time.Duration, bool) {
	x, ok := d.number(field, v)
	if !ok {
		return 0, false
	}
	if x > float64(maxDuration/unit) {
		d.found.addf(field, "must be at most %d (ten years)", int64(maxDuration/unit))
		return 0, false
	}
	return time.Duration(x * float64(unit)), true
}

// commands reads a list of shell commands (Ray's definitions/commands); nil when absent.
func (d *decoder) commands(field string, v any) []string {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		d.found.addf(field, "must be a list of shell commands")
		return nil
	}
	commands := make([]string, 0, len(list))
	for i, item := range list {
		if text, ok := d.str(index(field, i), item); ok {
			commands = append(commands, text)
		}
	}
	return commands
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
