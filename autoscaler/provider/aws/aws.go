package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/raygo-dev/raygo/autoscaler/provider"
)

// Tags every instance carries. The first four are Ray's (ray-node-type is the node's
// kind, head or worker; ray-user-node-type the available_node_types key).
const (
	TagClusterName   = "ray-cluster-name"
	TagNodeKind      = "ray-node-type"
	TagUserNodeType  = "ray-user-node-type"
	TagNodeName      = "ray-node-name"
	TagLaunchRequest = "raygo-launch-request"
	// nodeKindWorker is TagNodeKind of every instance this provider launches: the head
	// runs where `raygo up` runs, and Instances never lists a head.
	nodeKindWorker = "worker"
)

// Config is the provider's configuration.
type Config struct {
	// ClusterName is cluster_name: the ray-cluster-name tag of the cluster's instances.
	// Required.
	ClusterName string
	// Region is provider.region; "" leaves it to the SDK (AWS_REGION, the profile).
	Region string
	// GCSAddress is HOST:PORT of the head's GCS, which new nodes join. Required.
	GCSAddress string
	// NodeConfigs are the worker types' node_config, by type; New checks each.
	NodeConfigs map[string]map[string]any
	// Commands gives a worker type's initialization and setup commands, in order
	// (clusterconfig.Config.NodeCommands); nil for none.
	Commands func(nodeType string) (initialization, setup []string)
	// Raygo is the raygo command on the instances' image (default "raygo", from PATH).
	Raygo string
	// NodeToken is the node-scoped token launched nodes join with, written by their
	// user data to NodeTokenPath ("" for none). Never the cluster token: user data is
	// readable by whoever may describe the instance.
	NodeToken string
	// LaunchTimeout bounds one Launch, RunInstances in every subnet and the SDK's
	// retries included (default 2 min).
	LaunchTimeout time.Duration
	// CleanupTimeout bounds terminating what a failed launch created (default 1 min).
	CleanupTimeout time.Duration
	// Now is the clock of the unavailable offerings and of LaunchedAt (default
	// time.Now).
	Now func() time.Time
	// Client is the EC2 client; nil: one from the SDK's default configuration (the
	// usual environment, shared files and instance role; AWS_ENDPOINT_URL or
	// AWS_ENDPOINT_URL_EC2 replace the endpoint) with Region.
	Client *ec2.Client
}

// Provider launches EC2 instances. It is safe for concurrent use.
type Provider struct {
	cfg         Config
	client      *ec2.Client
	unavailable unavailableOfferings

	mu         sync.Mutex
	subnetZone map[string]string // availability zone by subnet id, learnt once
}

var _ provider.Provider = (*Provider)(nil)

// New checks the configuration and every node_config, and builds the EC2 client.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.ClusterName == "" {
		return nil, errors.New("aws: ClusterName: empty")
	}
	if cfg.GCSAddress == "" {
		return nil, errors.New("aws: GCSAddress: empty")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.NodeConfigs)) {
		if _, err := parseNodeConfig(cfg.NodeConfigs[name]); err != nil {
			return nil, fmt.Errorf("aws: available_node_types.%s.%w", name, err)
		}
	}
	if cfg.Raygo == "" {
		cfg.Raygo = "raygo"
	}
	if cfg.LaunchTimeout <= 0 {
		cfg.LaunchTimeout = 2 * time.Minute
	}
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.Client
	if client == nil {
		var opts []func(*config.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, config.WithRegion(cfg.Region))
		}
		awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("aws: load the AWS configuration: %w", err)
		}
		client = ec2.NewFromConfig(awsCfg)
	}
	return &Provider{cfg: cfg, client: client, subnetZone: map[string]string{}}, nil
}

// Launch runs req.Count instances of req.NodeType in one RunInstances call, in the first
// of the type's subnets whose offering is not known to be unavailable and that has the
// capacity. See the package comment for the errors.
func (p *Provider) Launch(ctx context.Context, req provider.LaunchRequest) ([]provider.Instance, error) {
	if req.Count <= 0 {
		return nil, nil
	}
	t, err := parseNodeConfig(req.NodeConfig)
	if err != nil {
		return nil, fmt.Errorf("launch %d %s: %w", req.Count, req.NodeType, err)
	}
	what := fmt.Sprintf("launch %d %s (%s)", req.Count, req.NodeType, t.input.InstanceType)
	ctx, cancel := context.WithTimeout(ctx, p.cfg.LaunchTimeout)
	defer cancel()
	script, err := p.userData(req, t.market == "spot")
	if err != nil {
		return nil, fmt.Errorf("%s: user data: %w", what, err)
	}
	zones, err := p.zones(ctx, t.subnets)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", what, describeError(err))
	}
	var refused []string
	for i, subnet := range t.subnets {
		o := offering{Market: t.market, InstanceType: string(t.input.InstanceType), Zone: zones[i]}
		where := subnetName(subnet, o.Zone)
		if p.unavailable.unavailable(o, p.cfg.Now()) {
			refused = append(refused, where+": unavailable (recent capacity error)")
			continue
		}
		in := p.runInput(t, req, subnet, i, script)
		out, err := p.client.RunInstances(ctx, in)
		if err == nil {
			instances, err := p.created(req, out.Instances)
			if err != nil {
				p.cleanup(req.RequestID)
				return nil, fmt.Errorf("%s in %s: %w", what, where, err)
			}
			return instances, nil
		}
		code := errorCode(err)
		switch {
		case zonalCapacityCodes[code]:
			p.unavailable.mark(o, p.cfg.Now())
			refused = append(refused, where+": "+code)
			continue
		case accountCapacityCodes[code]:
			return nil, fmt.Errorf("%s (%s): %s: %w", what, t.market, describeError(err), provider.ErrCapacity)
		}
		// The request may have reached EC2 (a timeout, a connection lost on the
		// way back): what it created carries the request's tag.
		p.cleanup(req.RequestID)
		return nil, fmt.Errorf("%s in %s: %s", what, where, describeError(err))
	}
	return nil, fmt.Errorf("%s (%s): no capacity in any subnet (%s): %w", what, t.market, strings.Join(refused, "; "), provider.ErrCapacity)
}

func subnetName(subnet, zone string) string {
	switch {
	case subnet == "":
		return "the default subnet"
	case zone == "":
		return subnet
	}
	return subnet + " (" + zone + ")"
}

// runInput is the RunInstances request of one attempt: the node_config's parameters, N
// instances all or none, the subnet, the tags and the user data. The client token makes
// an attempt the SDK retries idempotent.
func (p *Provider) runInput(t launchTemplate, req provider.LaunchRequest, subnet string, attempt int, script string) *ec2.RunInstancesInput {
	in := t.input // the slices below are replaced, not appended to in place
	in.MinCount = awssdk.Int32(int32(req.Count))
	in.MaxCount = awssdk.Int32(int32(req.Count))
	if subnet != "" {
		in.SubnetId = awssdk.String(subnet)
	}
	in.UserData = awssdk.String(base64.StdEncoding.EncodeToString([]byte(script)))
	token := fmt.Sprintf("%s-%s-%d", p.cfg.ClusterName, req.RequestID, attempt)
	if len(token) > 64 {
		token = token[len(token)-64:]
	}
	in.ClientToken = awssdk.String(token)
	tags := []types.Tag{
		{Key: awssdk.String(TagClusterName), Value: awssdk.String(p.cfg.ClusterName)},
		{Key: awssdk.String(TagNodeKind), Value: awssdk.String(nodeKindWorker)},
		{Key: awssdk.String(TagUserNodeType), Value: awssdk.String(req.NodeType)},
		{Key: awssdk.String(TagNodeName), Value: awssdk.String("ray-" + p.cfg.ClusterName + "-worker")},
		{Key: awssdk.String(TagLaunchRequest), Value: awssdk.String(req.RequestID)},
	}
	ours := map[string]bool{}
	for _, tag := range tags {
		ours[*tag.Key] = true
	}
	var specs []types.TagSpecification
	for _, spec := range t.input.TagSpecifications {
		if spec.ResourceType == types.ResourceTypeInstance {
			for _, tag := range spec.Tags {
				if tag.Key != nil && !ours[*tag.Key] {
					tags = append(tags, tag)
				}
			}
			continue
		}
		specs = append(specs, spec)
	}
	in.TagSpecifications = append(specs, types.TagSpecification{ResourceType: types.ResourceTypeInstance, Tags: tags})
	return &in
}

func (p *Provider) userData(req provider.LaunchRequest, spot bool) (string, error) {
	var initialization, setup []string
	if p.cfg.Commands != nil {
		initialization, setup = p.cfg.Commands(req.NodeType)
	}
	return userData(userDataParams{
		ClusterName: p.cfg.ClusterName, NodeType: req.NodeType, RequestID: req.RequestID,
		GCSAddress: p.cfg.GCSAddress, Raygo: p.cfg.Raygo, Initialization: initialization, Setup: setup,
		Resources: req.Resources, GPUModel: req.GPUModel, Labels: req.Labels, Spot: spot, NodeToken: p.cfg.NodeToken,
	})
}

// created checks RunInstances' answer: all of the request's instances, or an error.
func (p *Provider) created(req provider.LaunchRequest, instances []types.Instance) ([]provider.Instance, error) {
	if len(instances) != req.Count {
		return nil, fmt.Errorf("EC2 created %d instances, not %d", len(instances), req.Count)
	}
	out := make([]provider.Instance, len(instances))
	for i, inst := range instances {
		out[i] = provider.Instance{ID: awssdk.ToString(inst.InstanceId), NodeType: req.NodeType, State: state(inst),
			LaunchedAt: p.cfg.Now(), RequestID: req.RequestID}
	}
	return out, nil
}

func state(inst types.Instance) provider.InstanceState {
	if inst.State != nil && inst.State.Name == types.InstanceStateNameRunning {
		return provider.InstanceRunning
	}
	return provider.InstancePending
}

// zones returns the availability zone of each subnet ("" for ""), asking EC2 once for
// the subnets it has not seen.
func (p *Provider) zones(ctx context.Context, subnets []string) ([]string, error) {
	p.mu.Lock()
	var unknown []string
	for _, s := range subnets {
		if _, ok := p.subnetZone[s]; !ok && s != "" {
			unknown = append(unknown, s)
		}
	}
	p.mu.Unlock()
	if len(unknown) > 0 {
		out, err := p.client.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: unknown})
		if err != nil {
			return nil, fmt.Errorf("describe subnets %s: %w", strings.Join(unknown, ", "), err)
		}
		p.mu.Lock()
		for _, s := range out.Subnets {
			p.subnetZone[awssdk.ToString(s.SubnetId)] = awssdk.ToString(s.AvailabilityZone)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	zones := make([]string, len(subnets))
	for i, s := range subnets {
		zones[i] = p.subnetZone[s]
	}
	return zones, nil
}

// cleanup terminates every instance launch request id created, found by its tag, in a
// context of its own (the launch's may be what expired).
func (p *Provider) cleanup(requestID string) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CleanupTimeout)
	defer cancel()
	leaked, err := p.describe(ctx, types.Filter{Name: awssdk.String("tag:" + TagLaunchRequest), Values: []string{requestID}})
	if err != nil || len(leaked) == 0 {
		return
	}
	ids := make([]string, len(leaked))
	for i, inst := range leaked {
		ids[i] = inst.ID
	}
	_ = p.Terminate(ctx, ids)
}

// Instances lists the cluster's pending and running worker instances, by their tags.
func (p *Provider) Instances(ctx context.Context) ([]provider.Instance, error) {
	return p.describe(ctx)
}

// describe lists the cluster's pending and running workers that match the filters too.
func (p *Provider) describe(ctx context.Context, filters ...types.Filter) ([]provider.Instance, error) {
	filters = append([]types.Filter{
		{Name: awssdk.String("tag:" + TagClusterName), Values: []string{p.cfg.ClusterName}},
		{Name: awssdk.String("tag:" + TagNodeKind), Values: []string{nodeKindWorker}},
		{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
	}, filters...)
	var out []provider.Instance
	pages := ec2.NewDescribeInstancesPaginator(p.client, &ec2.DescribeInstancesInput{Filters: filters})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("aws: describe instances of cluster %s: %s", p.cfg.ClusterName, describeError(err))
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				out = append(out, provider.Instance{
					ID: awssdk.ToString(inst.InstanceId), NodeType: tag(inst, TagUserNodeType), State: state(inst),
					LaunchedAt: awssdk.ToTime(inst.LaunchTime), RequestID: tag(inst, TagLaunchRequest),
				})
			}
		}
	}
	slices.SortFunc(out, func(a, b provider.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func tag(inst types.Instance, key string) string {
	for _, t := range inst.Tags {
		if awssdk.ToString(t.Key) == key {
			return awssdk.ToString(t.Value)
		}
	}
	return ""
}

// Terminate terminates the instances, 1000 per call (EC2's limit). An id EC2 does not
// know (already gone) is not an error.
func (p *Provider) Terminate(ctx context.Context, ids []string) error {
	for chunk := range slices.Chunk(ids, 1000) {
		_, err := p.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: chunk})
		if err != nil && errorCode(err) == "InvalidInstanceID.NotFound" && len(chunk) > 1 {
			// One unknown id fails the call: terminate the others one by one.
			for _, id := range chunk {
				if err := p.Terminate(ctx, []string{id}); err != nil {
					return err
				}
			}
			continue
		}
		if err != nil && errorCode(err) != "InvalidInstanceID.NotFound" {
			return fmt.Errorf("aws: terminate %s: %s", strings.Join(chunk, ", "), describeError(err))
		}
	}
	return nil
}

// WaitTerminated waits until EC2 reports each instance terminated (or unknown), polling
// every few seconds, for at most timeout.
func (p *Provider) WaitTerminated(ctx context.Context, ids []string, timeout time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	waiter := ec2.NewInstanceTerminatedWaiter(p.client, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Second, 5*time.Second
	})
	if err := waiter.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}, timeout); err != nil {
		return fmt.Errorf("aws: wait for %s to terminate: %s", strings.Join(ids, ", "), describeError(err))
	}
	return nil
}

// errorCode is EC2's error code of err ("" when err is not an API error).
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// describeError is err in one line: "Code: message" for an EC2 error, without the
// SDK's operation and request-id wrapping, else the error's own text.
func describeError(err error) string {
	var apiErr smithy.APIError
	text := err.Error()
	if errors.As(err, &apiErr) {
		text = apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	} else if errors.Is(err, context.DeadlineExceeded) {
		text = "no answer in time: " + text
	}
	return oneLine(text)
}
