package sdk

import (
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Default resources, as Ray's: a task asks for 1 CPU; an actor for none while it runs.
const (
	DefaultTaskCPUs = 1.0
	// DefaultTaskMaxRetries is how often a task is run again after its worker died
	// (Ray's max_retries default). A function's own error is never retried.
	DefaultTaskMaxRetries = 3
)

// Option configures a task (Submit) or an actor (CreateActor). Options that make sense
// only for actors fail Submit with ErrInvalidArgument naming the option.
type Option func(*callOptions)

type callOptions struct {
	cpus, gpus     *float64
	resources      map[string]float64
	strategy       *pb.SchedulingStrategy
	labelSelector  map[string]string // hard
	softSelector   map[string]string
	maxRetries     int
	maxRestarts    int64
	maxTaskRetries int64
	name           string
	namespace      string
	detached       bool
	actorOnly      []string // actor-only options given, for Submit's error
}

func newCallOptions(opts []Option) *callOptions {
	o := &callOptions{maxRetries: DefaultTaskMaxRetries}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// resourcesFor returns the request: defaultCPUs unless WithCPUs, plus GPUs and custom
// resources, checked as the GCS checks them.
func (o *callOptions) resourcesFor(defaultCPUs float64) (map[string]float64, error) {
	out := map[string]float64{}
	for name, amount := range o.resources {
		out[name] = amount
	}
	cpus := defaultCPUs
	if o.cpus != nil {
		cpus = *o.cpus
	}
	if cpus > 0 {
		out["CPU"] = cpus
	}
	if o.gpus != nil && *o.gpus > 0 {
		out["GPU"] = *o.gpus
	}
	if _, err := resources.ParseTaskResources(out); err != nil {
		return nil, fmt.Errorf("%w: resources%v", ErrInvalidArgument, err)
	}
	return out, nil
}

// WithCPUs sets the CPUs the task or actor holds while it runs (tasks default to 1,
// actors to 0).
func WithCPUs(n float64) Option { return func(o *callOptions) { o.cpus = &n } }

// WithGPUs sets the GPUs it holds; its worker starts with CUDA_VISIBLE_DEVICES naming
// them (and CUDA_DEVICE_ORDER=PCI_BUS_ID).
func WithGPUs(n float64) Option { return func(o *callOptions) { o.gpus = &n } }

// WithResources adds custom resources (e.g. {"nvidia.com/mig-1g.10gb": 1}); CPU and GPU
// given here override WithCPUs and WithGPUs.
func WithResources(resources map[string]float64) Option {
	return func(o *callOptions) {
		if o.resources == nil {
			o.resources = map[string]float64{}
		}
		for name, amount := range resources {
			switch name {
			case "CPU":
				o.cpus = &amount
			case "GPU":
				o.gpus = &amount
			default:
				o.resources[name] = amount
			}
		}
	}
}

// InPlacementGroup runs the task or actor inside bundle bundleIndex of pg, holding its
// resources from that bundle; -1 means any bundle with room. A request larger than the
// bundle (or than every bundle, with -1) is rejected with an error naming the bundle.
func InPlacementGroup(pg *PlacementGroup, bundleIndex int) Option {
	return InPlacementGroupID(pg.ID, bundleIndex)
}

// InPlacementGroupID is InPlacementGroup for a group known by id.
func InPlacementGroupID(placementGroupID string, bundleIndex int) Option {
	return func(o *callOptions) {
		o.strategy = &pb.SchedulingStrategy{Kind: pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_PLACEMENT_GROUP, PlacementGroupId: placementGroupID, BundleIndex: int32(bundleIndex)}
	}
}

// WithSpread spreads tasks or actors over the nodes (Ray's "SPREAD" strategy).
func WithSpread() Option {
	return func(o *callOptions) {
		o.strategy = &pb.SchedulingStrategy{Kind: pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_SPREAD}
	}
}

// OnNode runs it on one node (Ray's NodeAffinitySchedulingStrategy); soft lets it run
// elsewhere when that node is dead or full.
func OnNode(nodeID string, soft bool) Option {
	return func(o *callOptions) {
		o.strategy = &pb.SchedulingStrategy{Kind: pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_NODE_AFFINITY, NodeId: nodeID, Soft: soft}
	}
}

// WithLabelSelector runs it only on nodes whose labels match hard, preferring nodes that
// match soft (Ray's label_selector option and NodeLabelSchedulingStrategy): label key →
// expression in Ray's syntax ("a", "in(a,b)", "!a", "!in(a,b)", and "exists()" /
// "!exists()"). Either may be nil. With the default strategy or WithSpread only; the GCS
// refuses a malformed selector naming the key. No node matching hard: the work waits
// (demand for the autoscaler), as work no node is large enough for.
func WithLabelSelector(hard, soft map[string]string) Option {
	return func(o *callOptions) {
		o.labelSelector, o.softSelector = maps.Clone(hard), maps.Clone(soft)
	}
}

// schedulingStrategy is the strategy to send: the one given (DEFAULT when none, with
// defaultBundle as its bundle index) with the label selectors.
func (o *callOptions) schedulingStrategy(defaultBundle int32) *pb.SchedulingStrategy {
	strategy := &pb.SchedulingStrategy{Kind: pb.SchedulingStrategyKind_SCHEDULING_STRATEGY_DEFAULT, BundleIndex: defaultBundle}
	if o.strategy != nil {
		strategy = proto.Clone(o.strategy).(*pb.SchedulingStrategy)
	}
	strategy.LabelSelector, strategy.SoftLabelSelector = o.labelSelector, o.softSelector
	return strategy
}

// WithMaxRetries sets how often a task runs again after its worker died (default 3;
// -1: without limit). A function's own error is not retried.
func WithMaxRetries(n int) Option { return func(o *callOptions) { o.maxRetries = n } }

// WithMaxRestarts sets how often an actor is restarted after its worker died (default
// 0; -1: without limit). Actors only.
func WithMaxRestarts(n int) Option {
	return func(o *callOptions) {
		o.maxRestarts = int64(n)
		o.actorOnly = append(o.actorOnly, "WithMaxRestarts")
	}
}

// WithMaxTaskRetries sets how often a method call is sent again after the actor's
// worker died during it (default 0; -1: without limit). Actors only.
func WithMaxTaskRetries(n int) Option {
	return func(o *callOptions) {
		o.maxTaskRetries = int64(n)
		o.actorOnly = append(o.actorOnly, "WithMaxTaskRetries")
	}
}

// ActorName names the actor, unique among live actors of its namespace; GetActor finds
// it. Actors only.
func ActorName(name string) Option {
	return func(o *callOptions) {
		o.name = name
		o.actorOnly = append(o.actorOnly, "ActorName")
	}
}

// ActorNamespace puts a named actor in another namespace than the client's. Actors only.
func ActorNamespace(namespace string) Option {
	return func(o *callOptions) {
		o.namespace = namespace
		o.actorOnly = append(o.actorOnly, "ActorNamespace")
	}
}

// DetachedActor makes the actor outlive the job that created it (Ray's
// lifetime="detached"): it runs until killed. Actors only.
func DetachedActor() Option {
	return func(o *callOptions) {
		o.detached = true
		o.actorOnly = append(o.actorOnly, "DetachedActor")
	}
}
