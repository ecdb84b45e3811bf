package queues

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/resources"
)

// DefaultQueueName is the queue of work that names no queue and whose namespace no
// queue claims. A config may define a queue with this name to bound it; otherwise it
// exists implicitly, outside any cohort, with no quota limit.
const DefaultQueueName = "default"

// Queueing strategies, as Kueue's queueingStrategy.
const (
	// BestEffortFIFO: priority then arrival, but a workload that cannot be admitted does
	// not block the ones behind it (Kueue's default).
	BestEffortFIFO = "BestEffortFIFO"
	// StrictFIFO: priority then arrival, and the head blocks the queue until admitted.
	StrictFIFO = "StrictFIFO"
)

// Config is one queue configuration file, validated whole by Load.
type Config struct {
	// Cohorts lists the cohorts by name. A queue may also name a cohort that is not
	// listed here (as in Kueue, where a Cohort object is optional).
	Cohorts []Cohort `yaml:"cohorts"`
	// Queues are Kueue's ClusterQueues.
	Queues []Queue `yaml:"queues"`
	// PriorityClasses add to, or replace by name, DefaultPriorityClasses.
	PriorityClasses []PriorityClass `yaml:"priorityClasses"`
	// FairSharing switches admission across queues to dominant-resource fair sharing,
	// as Kueue's Configuration.fairSharing.
	FairSharing FairSharing `yaml:"fairSharing"`

	// Filled by Load:
	queueIndex   map[string]int
	priorityByID map[string]PriorityClass
	exact        map[string]string // namespace -> queue
	prefixes     []namespacePrefix // glob "p*" -> queue, longest prefix first
}

// Cohort is a set of queues that lend each other unused nominal quota. Cohorts are
// flat: parentName (Kueue's hierarchical cohorts) is refused.
type Cohort struct {
	Name       string `yaml:"name"`
	ParentName string `yaml:"parentName"`
}

// FairSharing is the top-level switch (Kueue's Configuration.fairSharing).
type FairSharing struct {
	// Enable orders queues by weighted dominant-resource share instead of Kueue's
	// classic order (not borrowing first, then priority, then arrival).
	Enable bool `yaml:"enable"`
	// PreemptionStrategies is kept for preemption (Kueue's LessThanOrEqualToFinalShare,
	// LessThanInitialShare); admission does not read it.
	PreemptionStrategies []string `yaml:"preemptionStrategies"`
}

// Queue is Kueue's ClusterQueue.
type Queue struct {
	Name string `yaml:"name"`
	// Cohort (v1beta1) or CohortName (v1beta2): the cohort the queue borrows from and
	// lends to. At most one of the two, or both equal.
	Cohort     string `yaml:"cohort"`
	CohortName string `yaml:"cohortName"`
	// Namespaces are the Ray namespaces whose work lands in this queue: exact names, or
	// globs of the form "prefix*" (raygo's addition; Kueue selects namespaces by label).
	Namespaces []string `yaml:"namespaces"`
	// Resources gives the quota per resource name (CPU, GPU, memory in bytes,
	// nvidia.com/mig-<profile>, custom). A resource the queue does not list is not
	// limited by the queue.
	Resources map[string]ResourceQuota `yaml:"resources"`
	// QueueingStrategy: BestEffortFIFO (default) or StrictFIFO.
	QueueingStrategy string `yaml:"queueingStrategy"`
	// FairSharing.Weight weights the queue's share under fair sharing (default 1; 0
	// means the queue borrows only when no other queue wants to).
	FairSharing *QueueFairSharing `yaml:"fairSharing"`
	// Preemption is Kueue's ClusterQueue preemption policy, kept for preemption;
	// admission does not read it.
	Preemption *Preemption `yaml:"preemption"`
	// DefaultPriorityClass is the class of work in this queue that names none
	// (raygo's addition; empty = priority 0).
	DefaultPriorityClass string `yaml:"defaultPriorityClass"`
}

// ResourceQuota is one resource's quota of a queue, in resource units (GPUs, CPUs,
// bytes), as Kueue's ResourceQuota.
type ResourceQuota struct {
	// NominalQuota is what the queue is guaranteed (when nothing of it is lent out).
	NominalQuota *float64 `yaml:"nominalQuota"`
	// BorrowingLimit bounds what the queue may borrow from its cohort above its nominal
	// quota; absent = unlimited, and only allowed for a queue in a cohort.
	BorrowingLimit *float64 `yaml:"borrowingLimit"`
	// LendingLimit bounds what of its unused nominal quota the queue lends to its
	// cohort; absent = all of it.
	LendingLimit *float64 `yaml:"lendingLimit"`
}

// QueueFairSharing is Kueue's ClusterQueue.fairSharing.
type QueueFairSharing struct {
	Weight *float64 `yaml:"weight"`
}

// Preemption policies, as Kueue's ClusterQueue.preemption. The empty string is Never,
// Kueue's default for every policy.
const (
	// PreemptNever: the policy lets the queue evict nothing.
	PreemptNever = "Never"
	// PreemptLowerPriority: only work of a lower priority than the preemptor's.
	PreemptLowerPriority = "LowerPriority"
	// PreemptLowerOrNewerEqualPriority (withinClusterQueue): lower priority, or equal
	// priority and created after the preemptor.
	PreemptLowerOrNewerEqualPriority = "LowerOrNewerEqualPriority"
	// PreemptAny (reclaimWithinCohort): any priority, from queues borrowing the quota.
	PreemptAny = "Any"
)

// Preemption is Kueue's ClusterQueue.preemption, with raygo's timing knobs.
type Preemption struct {
	// ReclaimWithinCohort: Never (default), LowerPriority or Any. Whether the queue's
	// work may evict work of other queues of its cohort that borrow, to take back the
	// quota they borrow.
	ReclaimWithinCohort string `yaml:"reclaimWithinCohort"`
	// WithinClusterQueue: Never (default), LowerPriority or LowerOrNewerEqualPriority.
	// Whether the queue's work may evict the queue's own work.
	WithinClusterQueue string              `yaml:"withinClusterQueue"`
	BorrowWithinCohort *BorrowWithinCohort `yaml:"borrowWithinCohort"`
	// PreemptionDelay (raygo's addition) is how long the queue's pending work waits
	// before it may evict anything (default 0): capacity that frees up, or that the
	// autoscaler launches within this delay, is taken instead.
	PreemptionDelay Duration `yaml:"preemptionDelay"`
	// MinRuntime (raygo's addition) is how long the queue's work runs before it may be
	// evicted (default 0); a priority class's minRuntime also applies, the longer wins.
	MinRuntime Duration `yaml:"minRuntime"`
}

// BorrowWithinCohort is Kueue's preemption.borrowWithinCohort: whether work that
// borrows may evict work of other queues of the cohort to do so.
type BorrowWithinCohort struct {
	// Policy: Never (default) or LowerPriority.
	Policy string `yaml:"policy"`
	// MaxPriorityThreshold: only work with at most this priority may be evicted; absent
	// = any lower priority.
	MaxPriorityThreshold *int64 `yaml:"maxPriorityThreshold"`
}

// PriorityClass names a priority value. Higher values are admitted first.
type PriorityClass struct {
	Name  string `yaml:"name"`
	Value int64  `yaml:"value"`
	// Preemptible (raygo's extension) says whether work of this class may be evicted
	// to make room for other work; absent = true.
	Preemptible *bool `yaml:"preemptible"`
	// MinRuntime (raygo's extension) is how long work of this class runs before it may
	// be evicted; default 0.
	MinRuntime Duration `yaml:"minRuntime"`
	// GracePeriod (raygo's extension) is how long evicted work of this class has to
	// checkpoint and exit before it is killed; absent = DefaultGracePeriod, at most
	// MaxGracePeriod.
	GracePeriod *Duration `yaml:"gracePeriod"`
}

// DefaultGracePeriod and MaxGracePeriod bound PriorityClass.GracePeriod.
const (
	DefaultGracePeriod = 30 * Second
	MaxGracePeriod     = 10 * Minute
)

// Grace returns the class's grace period (DefaultGracePeriod when absent).
func (pc PriorityClass) Grace() Duration {
	if pc.GracePeriod == nil {
		return DefaultGracePeriod
	}
	return *pc.GracePeriod
}

// IsPreemptible reports whether work of the class may be evicted (absent = true).
func (pc PriorityClass) IsPreemptible() bool { return pc.Preemptible == nil || *pc.Preemptible }

// DefaultPriorityClasses are shipped with raygo; a config's priorityClasses add to them
// or replace one by name.
func DefaultPriorityClasses() []PriorityClass {
	no, yes := false, true
	return []PriorityClass{
		{Name: "system-critical", Value: 1_000_000, Preemptible: &no},
		{Name: "production-inference", Value: 10_000, Preemptible: &no},
		{Name: "training-high", Value: 1_000, Preemptible: &yes},
		{Name: "training", Value: 500, Preemptible: &yes},
		{Name: "development", Value: 100, Preemptible: &yes},
	}
}

// Quota is a queue's quota for one resource in fixed-point amounts.
type Quota struct {
	Nominal resources.Amount
	// Borrowing is the most the queue may use above Nominal; Unlimited when absent.
	Borrowing resources.Amount
	// Lending is the most of Nominal the queue lends; Nominal when absent.
	Lending resources.Amount
}

// Unlimited stands for an absent borrowingLimit.
var Unlimited = resources.MaxAmount

type namespacePrefix struct{ prefix, queue string }

// Default returns the configuration in force when a file sets nothing: the shipped
// priority classes and the implicit default queue.
func Default() *Config {
	c, err := Load([]byte("{}"))
	if err != nil {
		panic(err) // the empty config is valid
	}
	return c
}

// Load parses a YAML queue configuration and validates it whole. The error is a
// *fielderr.Error naming the field (`queues[1].resources["GPU"].nominalQuota`) and
// wrapping ErrInvalidConfig.
func Load(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fielderr.New(ErrInvalidConfig, "", "not valid YAML: %v", err)
	}
	if len(root.Content) > 0 {
		if err := checkKnownFields(root.Content[0], reflect.TypeFor[Config](), ""); err != nil {
			return nil, err
		}
	}
	var c Config
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fielderr.New(ErrInvalidConfig, "", "%v", err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// checkKnownFields walks the YAML tree along the Go type and refuses a key that names
// no field, with the path of the key: yaml's own KnownFields names only the type.
func checkKnownFields(node *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if t == reflect.TypeFor[Duration]() {
		if _, err := ParseDuration(node.Value); err != nil || node.Kind != yaml.ScalarNode {
			if err == nil {
				err = fmt.Errorf("must be a duration such as 30s, 10m or 1h30m")
			}
			return fielderr.New(ErrInvalidConfig, path, "%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return nil // the decoder reports the type error
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := node.Content[i].Value
			field, ok := yamlField(t, key)
			if !ok {
				return fielderr.New(ErrInvalidConfig, join(path, key), "unknown field (line %d)", node.Content[i].Line)
			}
			if err := checkKnownFields(node.Content[i+1], field.Type, join(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			return nil
		}
		for i, item := range node.Content {
			if err := checkKnownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if err := checkKnownFields(node.Content[i+1], t.Elem(), path+resources.Field(node.Content[i].Value)); err != nil {
				return err
			}
		}
	}
	return nil
}

func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key && name != "" && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func invalid(field, format string, args ...any) error {
	return fielderr.New(ErrInvalidConfig, field, format, args...)
}

var (
	queueingStrategies  = []string{BestEffortFIFO, StrictFIFO}
	reclaimPolicies     = []string{"", "Never", "LowerPriority", "Any"}
	withinQueuePolicies = []string{"", "Never", "LowerPriority", "LowerOrNewerEqualPriority"}
	borrowPolicies      = []string{"", "Never", "LowerPriority"}
	preemptStrategies   = []string{"LessThanOrEqualToFinalShare", "LessThanInitialShare"}
)

func oneOf(field, value string, allowed []string) error {
	if !slices.Contains(allowed, value) {
		return invalid(field, "must be one of %s, got %q", strings.Join(slices.DeleteFunc(slices.Clone(allowed), func(s string) bool { return s == "" }), ", "), value)
	}
	return nil
}

// validate checks the whole config, fills defaults and builds the lookup tables.
func (c *Config) validate() error {
	cohorts := map[string]bool{}
	for i, co := range c.Cohorts {
		field := fmt.Sprintf("cohorts[%d]", i)
		if err := checkName(field+".name", co.Name); err != nil {
			return err
		}
		if cohorts[co.Name] {
			return invalid(field+".name", "cohort %q listed twice", co.Name)
		}
		if co.ParentName != "" {
			return invalid(field+".parentName", "cohorts are flat in raygo: parentName is not supported")
		}
		cohorts[co.Name] = true
	}
	for i, s := range c.FairSharing.PreemptionStrategies {
		if err := oneOf(fmt.Sprintf("fairSharing.preemptionStrategies[%d]", i), s, preemptStrategies); err != nil {
			return err
		}
	}

	c.priorityByID = map[string]PriorityClass{}
	for _, pc := range DefaultPriorityClasses() {
		c.priorityByID[pc.Name] = pc
	}
	seenClass := map[string]bool{}
	for i, pc := range c.PriorityClasses {
		field := fmt.Sprintf("priorityClasses[%d]", i)
		if err := checkName(field+".name", pc.Name); err != nil {
			return err
		}
		if seenClass[pc.Name] {
			return invalid(field+".name", "priority class %q listed twice", pc.Name)
		}
		seenClass[pc.Name] = true
		if pc.Preemptible == nil {
			yes := true
			pc.Preemptible = &yes
		}
		if pc.GracePeriod != nil && *pc.GracePeriod > MaxGracePeriod {
			return invalid(field+".gracePeriod", "must be at most %s, got %s", MaxGracePeriod, *pc.GracePeriod)
		}
		c.priorityByID[pc.Name] = pc
	}

	c.queueIndex = map[string]int{}
	c.exact = map[string]string{}
	for i := range c.Queues {
		q := &c.Queues[i]
		field := fmt.Sprintf("queues[%d]", i)
		if err := checkName(field+".name", q.Name); err != nil {
			return err
		}
		if _, dup := c.queueIndex[q.Name]; dup {
			return invalid(field+".name", "queue %q listed twice", q.Name)
		}
		c.queueIndex[q.Name] = i
		if q.Cohort != "" && q.CohortName != "" && q.Cohort != q.CohortName {
			return invalid(field+".cohortName", "%q differs from cohort %q: give one of them", q.CohortName, q.Cohort)
		}
		if q.Cohort == "" {
			q.Cohort = q.CohortName
		}
		q.CohortName = q.Cohort
		if q.QueueingStrategy == "" {
			q.QueueingStrategy = BestEffortFIFO
		}
		if err := oneOf(field+".queueingStrategy", q.QueueingStrategy, queueingStrategies); err != nil {
			return err
		}
		if q.FairSharing != nil && q.FairSharing.Weight != nil && !(*q.FairSharing.Weight >= 0 && *q.FairSharing.Weight < 1e9) {
			return invalid(field+".fairSharing.weight", "must be a number >= 0, got %v", *q.FairSharing.Weight)
		}
		if p := q.Preemption; p != nil {
			if err := oneOf(field+".preemption.reclaimWithinCohort", p.ReclaimWithinCohort, reclaimPolicies); err != nil {
				return err
			}
			if err := oneOf(field+".preemption.withinClusterQueue", p.WithinClusterQueue, withinQueuePolicies); err != nil {
				return err
			}
			if p.BorrowWithinCohort != nil {
				if err := oneOf(field+".preemption.borrowWithinCohort.policy", p.BorrowWithinCohort.Policy, borrowPolicies); err != nil {
					return err
				}
			}
		}
		if q.DefaultPriorityClass != "" {
			if _, ok := c.priorityByID[q.DefaultPriorityClass]; !ok {
				return invalid(field+".defaultPriorityClass", "no priority class %q", q.DefaultPriorityClass)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(q.Resources)) {
			if _, err := compileQuota(field+".resources"+resources.Field(name), name, q.Resources[name], q.Cohort != ""); err != nil {
				return err
			}
		}
	}
	return c.indexNamespaces()
}

func checkName(field, name string) error {
	if name == "" {
		return invalid(field, "must not be empty")
	}
	if len(name) > 253 {
		return invalid(field, "must be at most 253 bytes, got %d", len(name))
	}
	return nil
}

func compileQuota(field, name string, rq ResourceQuota, inCohort bool) (Quota, error) {
	if err := resources.CheckName(name); err != nil {
		return Quota{}, fielderr.WithPrefix(err, strings.TrimSuffix(field, resources.Field(name)))
	}
	if err := resources.CheckMIGResource(name, 0); err != nil {
		return Quota{}, fielderr.WithPrefix(err, strings.TrimSuffix(field, resources.Field(name)))
	}
	amount := func(sub string, v *float64) (resources.Amount, error) {
		a, err := resources.AmountFromFloat(*v)
		if err != nil {
			return 0, fielderr.WithPrefix(err, field+"."+sub)
		}
		return a, nil
	}
	if rq.NominalQuota == nil {
		return Quota{}, invalid(field+".nominalQuota", "is required")
	}
	var q Quota
	var err error
	if q.Nominal, err = amount("nominalQuota", rq.NominalQuota); err != nil {
		return Quota{}, err
	}
	q.Borrowing, q.Lending = Unlimited, q.Nominal
	if !inCohort {
		q.Borrowing = 0
	}
	if rq.BorrowingLimit != nil {
		if !inCohort {
			return Quota{}, invalid(field+".borrowingLimit", "a queue borrows only from its cohort: set cohort, or remove borrowingLimit")
		}
		if q.Borrowing, err = amount("borrowingLimit", rq.BorrowingLimit); err != nil {
			return Quota{}, err
		}
	}
	if rq.LendingLimit != nil {
		if !inCohort {
			return Quota{}, invalid(field+".lendingLimit", "a queue lends only to its cohort: set cohort, or remove lendingLimit")
		}
		if q.Lending, err = amount("lendingLimit", rq.LendingLimit); err != nil {
			return Quota{}, err
		}
		if q.Lending > q.Nominal {
			return Quota{}, invalid(field+".lendingLimit", "must be at most nominalQuota (%s), got %s", q.Nominal, q.Lending)
		}
	}
	return q, nil
}

// indexNamespaces builds namespace -> queue and refuses a namespace two queues claim:
// the same exact name twice, or two globs that can match one namespace (globs are
// "prefix*", so they can when one prefix starts the other).
func (c *Config) indexNamespaces() error {
	type claim struct{ queue, field string }
	exact := map[string]claim{}
	var globs []struct {
		prefix string
		claim
	}
	for i, q := range c.Queues {
		for j, ns := range q.Namespaces {
			field := fmt.Sprintf("queues[%d].namespaces[%d]", i, j)
			if ns == "" {
				return invalid(field, "must not be empty")
			}
			prefix, isGlob := strings.CutSuffix(ns, "*")
			if strings.ContainsAny(prefix, "*?[]\\") {
				return invalid(field, "a namespace is an exact name or a glob \"prefix*\", got %q", ns)
			}
			if !isGlob {
				if other, dup := exact[ns]; dup {
					return fielderr.New(ErrNamespaceConflict, field, "namespace %q is already claimed by queue %q (%s)", ns, other.queue, other.field)
				}
				exact[ns] = claim{q.Name, field}
				continue
			}
			for _, g := range globs {
				if strings.HasPrefix(g.prefix, prefix) || strings.HasPrefix(prefix, g.prefix) {
					return fielderr.New(ErrNamespaceConflict, field, "glob %q and glob %q* of queue %q (%s) can match the same namespace", ns, g.prefix, g.queue, g.field)
				}
			}
			globs = append(globs, struct {
				prefix string
				claim
			}{prefix, claim{q.Name, field}})
		}
	}
	for ns, cl := range exact {
		c.exact[ns] = cl.queue
	}
	for _, g := range globs {
		c.prefixes = append(c.prefixes, namespacePrefix{g.prefix, g.queue})
	}
	return nil
}

// QueueForNamespace resolves a Ray namespace to its queue: an exact name beats a glob;
// a namespace no queue claims goes to DefaultQueueName. Globs never overlap (Load
// refuses that), so at most one matches.
func (c *Config) QueueForNamespace(namespace string) string {
	if q, ok := c.exact[namespace]; ok {
		return q
	}
	for _, p := range c.prefixes {
		if strings.HasPrefix(namespace, p.prefix) {
			return p.queue
		}
	}
	return DefaultQueueName
}

// Queue returns the named queue. DefaultQueueName always exists: when the config does
// not define it, it is an empty queue (no cohort, no limit).
func (c *Config) Queue(name string) (Queue, bool) {
	if i, ok := c.queueIndex[name]; ok {
		return c.Queues[i], true
	}
	if name == DefaultQueueName {
		return Queue{Name: DefaultQueueName, QueueingStrategy: BestEffortFIFO}, true
	}
	return Queue{}, false
}

// CheckQueue returns an error naming the queue when the config has no such queue.
func (c *Config) CheckQueue(name string) error {
	if _, ok := c.Queue(name); !ok {
		return fielderr.New(ErrUnknownQueue, "queue", "no queue %q in the queue configuration", name)
	}
	return nil
}

// Priority returns the value of a priority class; "" is the queue's default class, or 0.
func (c *Config) Priority(class, queue string) (int64, error) {
	if class == "" {
		q, _ := c.Queue(queue)
		if q.DefaultPriorityClass == "" {
			return 0, nil
		}
		class = q.DefaultPriorityClass
	}
	pc, ok := c.priorityByID[class]
	if !ok {
		return 0, fielderr.New(ErrUnknownPriorityClass, "priority", "no priority class %q", class)
	}
	return pc.Value, nil
}

// PriorityClass returns the named class (shipped or configured).
func (c *Config) PriorityClass(name string) (PriorityClass, bool) {
	pc, ok := c.priorityByID[name]
	return pc, ok
}

// Quotas returns the queue's quotas in fixed-point amounts, by resource name. A
// resource not in the map is not limited by the queue.
func (q Queue) Quotas() map[string]Quota {
	out := make(map[string]Quota, len(q.Resources))
	for name, rq := range q.Resources {
		quota, err := compileQuota("", name, rq, q.Cohort != "")
		if err == nil { // Load validated every quota
			out[name] = quota
		}
	}
	return out
}

// Weight is the queue's fair-sharing weight (default 1).
func (q Queue) Weight() float64 {
	if q.FairSharing == nil || q.FairSharing.Weight == nil {
		return 1
	}
	return *q.FairSharing.Weight
}
