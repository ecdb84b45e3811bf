package clusterconfig

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/raygo-dev/raygo/autoscaler"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Defaults of the keys a file may leave out: Ray's provider defaults.yaml values
// (ray/autoscaler/aws/defaults.yaml and its peers), so a file means the same to both.
const (
	// DefaultMaxWorkers is max_workers: worker nodes, the head not counted.
	DefaultMaxWorkers = 2
	// DefaultUpscalingSpeed is upscaling_speed.
	DefaultUpscalingSpeed = 1.0
	// DefaultIdleTimeout is idle_timeout_minutes (5).
	DefaultIdleTimeout = 5 * time.Minute
)

// DefaultMaxUnavailable is provider.raygo.disruption.max_unavailable: 10% of the nodes.
var DefaultMaxUnavailable = MaxUnavailable{Percent: 10}

// Config is one cluster YAML (Ray's cluster launcher format, Ray 2.60's ray-schema.json),
// as raygo reads it. Parse fills it from a file and validates it; a Config built in Go
// starts from DefaultConfig and is checked with Validate.
type Config struct {
	// ClusterName is cluster_name: names the cluster's nodes and their cloud tags.
	// Required.
	ClusterName string
	// MaxWorkers is max_workers: the most worker nodes (the head not counted, launching
	// nodes counted) the cluster runs, in nodes. Default DefaultMaxWorkers.
	MaxWorkers int
	// UpscalingSpeed is upscaling_speed: tasks and actors launch at most
	// max(5, speed × running nodes) nodes in one round. Dimensionless, >= 0. Default 1.
	UpscalingSpeed float64
	// IdleTimeout is idle_timeout_minutes: how long a worker node may stay idle before it
	// is terminated, for node types without idle_timeout_s. Default 5 minutes.
	IdleTimeout time.Duration
	// HeadNodeType is head_node_type: the key of NodeTypes the head node is. Required.
	HeadNodeType string
	// Provider is provider: the cloud, its own settings and raygo's.
	Provider Provider
	// NodeTypes is available_node_types, by name. At least one.
	NodeTypes map[string]NodeTypeConfig

	// InitializationCommands, SetupCommands, HeadSetupCommands and WorkerSetupCommands
	// are the shell commands of the same keys, as written: run on a node before
	// `raygo start` (NodeCommands merges them as Ray does).
	InitializationCommands []string
	SetupCommands          []string
	HeadSetupCommands      []string
	WorkerSetupCommands    []string

	// Ignored lists the field paths of keys Ray's schema allows that raygo does not act
	// on (docker, file_mounts, auth, rsync_*, …), each when set to something other than
	// an empty value, sorted. The caller reports them once.
	Ignored []string
}

// Provider is the provider: key. Ray's schema leaves it open; raygo reads type and
// region, keeps every other key for the provider, and reads its own settings under
// provider.raygo (strict: unknown keys there are errors).
type Provider struct {
	// Type is provider.type: "aws", "fake_multinode" (Ray's local fake provider, run by
	// raygo as local processes), … Required.
	Type string
	// Region is provider.region ("us-west-2"); "" when not given.
	Region string
	// Settings is every provider key but raygo, as written (type and region included),
	// for the provider implementation.
	Settings map[string]any
	// Raygo is provider.raygo.
	Raygo Raygo
}

// Raygo is provider.raygo: raygo's settings, kept under provider so that the file stays
// valid for `ray up`.
type Raygo struct {
	// NodeTypes is provider.raygo.node_types: raygo's settings of node types of
	// available_node_types, by the same names. A type may be left out.
	NodeTypes map[string]RaygoNodeType
	// MaxUnavailable is provider.raygo.disruption.max_unavailable: how many nodes
	// voluntary scale-down may take at once. Default DefaultMaxUnavailable.
	MaxUnavailable MaxUnavailable
}

// RaygoNodeType is provider.raygo.node_types.<type>.
type RaygoNodeType struct {
	// PricePerHour is price_per_hour: one node's cost per hour, in the provider's
	// currency; >= 0. 0: unknown (the planner then prefers priced types).
	PricePerHour float64
	// GPUModel is gpu_model: one of the machine models raygo knows (GPUModels), for a
	// type whose node_config.InstanceType raygo does not map itself. "" when not given.
	GPUModel string
	// NVLinkIslands is nvlink_islands: the sizes of the node's NVLink islands in GPU
	// index order, in GPUs, each >= 1, summing to resources.GPU. Empty: the model's
	// islands, or none known.
	NVLinkIslands []int
	// ScalableUnit and Rack are scalable_unit and rack: the node's position in the
	// fabric, registered as the topology.raygo.io/su and topology.raygo.io/rack labels.
	ScalableUnit string
	Rack         string
	// ExpectedLaunch is expected_launch_s: how long a launch usually takes until the
	// node registers. 0: unknown.
	ExpectedLaunch time.Duration
}

// NodeTypeConfig is available_node_types.<type>.
type NodeTypeConfig struct {
	// NodeConfig is node_config as written: the provider's launch settings (for AWS the
	// EC2 RunInstances parameters: InstanceType, ImageId, InstanceMarketOptions, …).
	// raygo reads InstanceType for the GPU topology. Required (may be empty).
	NodeConfig map[string]any
	// Resources is resources as written: integer amounts, memory and
	// object_store_memory in bytes. Required (may be empty). GPU may be left out for an
	// instance type or gpu_model that gives it.
	Resources map[string]int64
	// MinWorkers is min_workers: nodes of the type always kept (the head not counted).
	// Default 0.
	MinWorkers int
	// MaxWorkers is max_workers: the most worker nodes of the type. Default: the
	// cluster's MaxWorkers, or 0 for the head node's type (as Ray).
	MaxWorkers int
	// IdleTimeout is idle_timeout_s: this type's idle timeout; nil (not given, or null)
	// means the cluster's IdleTimeout.
	IdleTimeout *time.Duration
	// Priority is priority: among types of equal price the higher is launched.
	Priority int
	// Labels is labels: the labels a node of the type registers with.
	Labels map[string]string
	// InitializationCommands and WorkerSetupCommands replace, for a worker of this
	// type, the cluster's initialization_commands and setup_commands +
	// worker_setup_commands (as Ray). nil when not given.
	InitializationCommands []string
	WorkerSetupCommands    []string
}

// DefaultConfig is a Config with every default set and nothing required filled in:
// ClusterName, Provider.Type, NodeTypes and HeadNodeType are for the caller.
func DefaultConfig() *Config {
	return &Config{
		MaxWorkers:     DefaultMaxWorkers,
		UpscalingSpeed: DefaultUpscalingSpeed,
		IdleTimeout:    DefaultIdleTimeout,
		Provider:       Provider{Raygo: Raygo{MaxUnavailable: DefaultMaxUnavailable}},
		NodeTypes:      map[string]NodeTypeConfig{},
	}
}

// Validate checks the config's values and the references between them, and returns
// every problem as Errors (nil when there is none). Messages name the YAML field path.
func (c *Config) Validate() error {
	var found problems
	c.validate(&found)
	return found.result()
}

func (c *Config) validate(found *problems) {
	if c.ClusterName == "" {
		found.addf("cluster_name", "is required")
	}
	if c.MaxWorkers < 0 {
		found.addf("max_workers", "must be an integer >= 0")
	}
	if !finiteAtLeastZero(c.UpscalingSpeed) {
		found.addf("upscaling_speed", "must be a number >= 0")
	}
	if c.IdleTimeout < 0 {
		found.addf("idle_timeout_minutes", "must be a number >= 0")
	}
	if c.Provider.Type == "" {
		found.addf("provider.type", "is required")
	}
	switch {
	case len(c.NodeTypes) == 0:
		found.addf("available_node_types", "must define at least one node type")
	case c.HeadNodeType == "":
		found.addf("head_node_type", "is required when available_node_types is set")
	default:
		if _, ok := c.NodeTypes[c.HeadNodeType]; !ok {
			found.addf("head_node_type", "names no node type of available_node_types (%q)", c.HeadNodeType)
		}
	}
	minWorkers := 0
	for _, name := range slices.Sorted(maps.Keys(c.NodeTypes)) {
		nodeType := c.NodeTypes[name]
		minWorkers += max(nodeType.MinWorkers, 0)
		c.validateNodeType(name, nodeType, found)
	}
	if c.MaxWorkers >= 0 && minWorkers > c.MaxWorkers {
		found.addf("max_workers", "must be at least the sum of min_workers over available_node_types (%d), got %d", minWorkers, c.MaxWorkers)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Provider.Raygo.NodeTypes)) {
		if _, ok := c.NodeTypes[name]; !ok {
			found.addf(join(raygoNodeTypesPath, name), "names no node type of available_node_types")
		}
	}
	if !c.Provider.Raygo.MaxUnavailable.valid() {
		found.addf(maxUnavailablePath, "%s", maxUnavailableProblem)
	}
}

const (
	raygoNodeTypesPath = "provider.raygo.node_types"
	maxUnavailablePath = "provider.raygo.disruption.max_unavailable"
)

func (c *Config) validateNodeType(name string, nodeType NodeTypeConfig, found *problems) {
	path := join("available_node_types", name)
	for _, resource := range slices.Sorted(maps.Keys(nodeType.Resources)) {
		field := join(join(path, "resources"), resource)
		amount := nodeType.Resources[resource]
		if amount < 0 {
			found.addf(field, "must be an integer >= 0")
			continue
		}
		// The one rule for what a node may offer (names, amounts, whole GPUs).
		if _, err := resources.ParseNodeResources(map[string]float64{resource: float64(amount)}); err != nil {
			found.addShared(field, err)
		}
	}
	if nodeType.MinWorkers < 0 {
		found.addf(join(path, "min_workers"), "must be an integer >= 0")
	}
	if nodeType.MaxWorkers < 0 {
		found.addf(join(path, "max_workers"), "must be an integer >= 0")
	}
	if nodeType.MinWorkers >= 0 && nodeType.MaxWorkers >= 0 && nodeType.MinWorkers > nodeType.MaxWorkers {
		found.addf(join(path, "min_workers"), "must be at most max_workers (%d), got %d", nodeType.MaxWorkers, nodeType.MinWorkers)
	}
	if nodeType.IdleTimeout != nil && *nodeType.IdleTimeout < 0 {
		found.addf(join(path, "idle_timeout_s"), "must be a number >= 0")
	}
	settings := c.Provider.Raygo.NodeTypes[name]
	settingsPath := join(raygoNodeTypesPath, name)
	if !finiteAtLeastZero(settings.PricePerHour) {
		found.addf(join(settingsPath, "price_per_hour"), "must be a number >= 0")
	}
	if settings.ExpectedLaunch < 0 {
		found.addf(join(settingsPath, "expected_launch_s"), "must be a number >= 0")
	}
	c.validateLabels(name, nodeType, settings, found)
	resolveGPUTopology(name, nodeType, settings, found)
}

// validateLabels checks the type's labels one by one with the shared node-label rule, so
// that every bad label is reported, and the labels raygo adds (rack, scalable unit)
// against them.
func (c *Config) validateLabels(name string, nodeType NodeTypeConfig, settings RaygoNodeType, found *problems) {
	labelsPath := join(join("available_node_types", name), "labels")
	if len(nodeType.Labels) > nodelabel.MaxLabels {
		found.addShared(labelsPath, nodelabel.CheckLabels(nodeType.Labels))
	} else {
		for _, key := range slices.Sorted(maps.Keys(nodeType.Labels)) {
			if err := nodelabel.CheckLabels(map[string]string{key: nodeType.Labels[key]}); err != nil {
				found.addShared(join(labelsPath, key), err)
			}
		}
	}
	if _, ok := nodeType.Labels[nodelabel.NodeType]; ok {
		found.addf(join(labelsPath, nodelabel.NodeType), "is set by the autoscaler to the node type's name")
	}
	settingsPath := join(raygoNodeTypesPath, name)
	for _, derived := range []struct{ key, field, value string }{
		{nodelabel.Rack, "rack", settings.Rack},
		{nodelabel.ScalableUnit, "scalable_unit", settings.ScalableUnit},
	} {
		if derived.value == "" {
			continue
		}
		field := join(settingsPath, derived.field)
		if err := nodelabel.CheckLabels(map[string]string{derived.key: derived.value}); err != nil {
			found.addShared(field, err)
		}
		if labelValue, ok := nodeType.Labels[derived.key]; ok && labelValue != derived.value {
			found.addf(field, "is %q but labels[%q] is %q", derived.value, derived.key, labelValue)
		}
	}
}

func finiteAtLeastZero(value float64) bool {
	return value >= 0 && !math.IsInf(value, 1)
}

// WorkerTypes is every type of available_node_types as the planner reads it
// (autoscaler.Input.Types), sorted by name. The head node's type is among them: as in
// Ray, its MaxWorkers (default 0) counts the workers of that type launched besides the
// head, so with the default the planner never launches it; HeadType gives the head's
// own row. Resources include the GPU count an instance type or gpu_model implies; Labels
// include autoscaler.raygo.io/node-type and the rack and scalable-unit labels of
// provider.raygo. Only for a validated Config (Parse's, or one whose Validate returned
// nil).
func (c *Config) WorkerTypes() []autoscaler.NodeType {
	types := make([]autoscaler.NodeType, 0, len(c.NodeTypes))
	for _, name := range slices.Sorted(maps.Keys(c.NodeTypes)) {
		types = append(types, c.nodeType(name))
	}
	return types
}

// HeadType is the head node's type (HeadNodeType) as the planner reads it.
func (c *Config) HeadType() autoscaler.NodeType { return c.nodeType(c.HeadNodeType) }

func (c *Config) nodeType(name string) autoscaler.NodeType {
	nodeType := c.NodeTypes[name]
	settings := c.Provider.Raygo.NodeTypes[name]
	topology := resolveGPUTopology(name, nodeType, settings, &problems{})
	amounts := make(map[string]float64, len(nodeType.Resources)+1)
	for resource, amount := range nodeType.Resources {
		amounts[resource] = float64(amount)
	}
	if topology.gpus > 0 {
		amounts[resources.GPU] = float64(topology.gpus)
	}
	set, err := resources.ParseNodeResources(amounts)
	if err != nil {
		set = resources.Set{} // not validated: the caller broke the contract
	}
	labels := maps.Clone(nodeType.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[nodelabel.NodeType] = name
	if settings.Rack != "" {
		labels[nodelabel.Rack] = settings.Rack
	}
	if settings.ScalableUnit != "" {
		labels[nodelabel.ScalableUnit] = settings.ScalableUnit
	}
	idleTimeout := c.IdleTimeout
	if nodeType.IdleTimeout != nil {
		idleTimeout = *nodeType.IdleTimeout
	}
	return autoscaler.NodeType{
		Name:         name,
		Resources:    set,
		Labels:       labels,
		GPUModel:     topology.model,
		GPUIslands:   topology.islands,
		PricePerHour: settings.PricePerHour,
		Priority:     nodeType.Priority,
		MinWorkers:   nodeType.MinWorkers,
		MaxWorkers:   nodeType.MaxWorkers,
		IdleTimeout:  idleTimeout,
	}
}

// NodeCommands are the commands run on a new node of the type before `raygo start`,
// merged as Ray merges them: initialization commands (the type's, else the cluster's),
// then setup commands: for the head, setup_commands + head_setup_commands; for a worker,
// the type's worker_setup_commands when given, else setup_commands +
// worker_setup_commands.
func (c *Config) NodeCommands(typeName string, head bool) (initialization, setup []string) {
	nodeType := c.NodeTypes[typeName]
	initialization = c.InitializationCommands
	if nodeType.InitializationCommands != nil {
		initialization = nodeType.InitializationCommands
	}
	switch {
	case head:
		setup = slices.Concat(c.SetupCommands, c.HeadSetupCommands)
	case nodeType.WorkerSetupCommands != nil:
		setup = nodeType.WorkerSetupCommands
	default:
		setup = slices.Concat(c.SetupCommands, c.WorkerSetupCommands)
	}
	return slices.Clone(initialization), setup
}
