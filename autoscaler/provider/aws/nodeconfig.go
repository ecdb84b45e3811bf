package aws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// launchTemplate is a node type's node_config read as RunInstances parameters.
type launchTemplate struct {
	// input holds every parameter node_config gave, except those Launch sets itself
	// (MinCount, MaxCount, SubnetId, UserData, ClientToken, DryRun).
	input ec2.RunInstancesInput
	// subnets are the subnets to try, in order: SubnetIds (Ray's key), else SubnetId;
	// one "" (EC2's default subnet, or the network interfaces') when neither is given.
	subnets []string
	// market is "spot" or "on-demand".
	market string
}

// setByLaunch are the RunInstances parameters Launch sets; node_config's are ignored.
var setByLaunch = []string{"MinCount", "MaxCount", "SubnetId", "UserData", "ClientToken", "DryRun"}

// IgnoredKeys lists the node_config keys the provider does not use: keys that are not
// RunInstances parameters (nor Ray's SubnetIds), and the parameters Launch sets itself.
// Sorted, for a warning.
func IgnoredKeys(nodeConfig map[string]any) []string {
	var out []string
	for key := range nodeConfig {
		if !isRunInstancesParameter(key) || slices.ContainsFunc(setByLaunch, func(s string) bool { return strings.EqualFold(s, key) }) {
			if !strings.EqualFold(key, "SubnetIds") && !strings.EqualFold(key, "SubnetId") {
				out = append(out, key)
			}
		}
	}
	slices.Sort(out)
	return out
}

func isRunInstancesParameter(key string) bool {
	_, ok := reflect.TypeFor[ec2.RunInstancesInput]().FieldByNameFunc(func(name string) bool { return strings.EqualFold(name, key) })
	return ok
}

// parseNodeConfig reads node_config as boto3's RunInstances parameters, which is what
// Ray passes it to: every key of RunInstancesInput with its AWS name and structure
// (InstanceMarketOptions.SpotOptions.MaxPrice, BlockDeviceMappings[].Ebs.VolumeSize,
// …). Unknown keys at the top level are ignored (IgnoredKeys); inside a parameter they
// are an error, as is a value of the wrong type, naming the field.
func parseNodeConfig(nodeConfig map[string]any) (launchTemplate, error) {
	known := map[string]any{}
	var subnetIDs []string
	var subnetID string
	for key, value := range nodeConfig {
		switch {
		case strings.EqualFold(key, "SubnetIds"):
			list, ok := value.([]any)
			if !ok {
				return launchTemplate{}, fmt.Errorf("node_config.SubnetIds: must be a list of subnet ids")
			}
			for i, v := range list {
				s, ok := v.(string)
				if !ok || s == "" {
					return launchTemplate{}, fmt.Errorf("node_config.SubnetIds[%d]: must be a subnet id", i)
				}
				subnetIDs = append(subnetIDs, s)
			}
		case strings.EqualFold(key, "SubnetId"):
			s, ok := value.(string)
			if !ok || s == "" {
				return launchTemplate{}, fmt.Errorf("node_config.SubnetId: must be a subnet id")
			}
			subnetID = s
		case isRunInstancesParameter(key) && !slices.ContainsFunc(setByLaunch, func(s string) bool { return strings.EqualFold(s, key) }):
			known[key] = value
		}
	}
	raw, err := json.Marshal(known)
	if err != nil {
		return launchTemplate{}, fmt.Errorf("node_config: %w", err)
	}
	var t launchTemplate
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t.input); err != nil {
		return launchTemplate{}, fmt.Errorf("node_config: %v", strings.ReplaceAll(err.Error(), "RunInstancesInput.", ""))
	}
	if t.input.InstanceType == "" {
		return launchTemplate{}, fmt.Errorf("node_config.InstanceType: required")
	}
	if t.input.ImageId == nil && t.input.LaunchTemplate == nil {
		return launchTemplate{}, fmt.Errorf("node_config.ImageId: required (or a LaunchTemplate)")
	}
	switch {
	case len(subnetIDs) > 0:
		t.subnets = subnetIDs
	case subnetID != "":
		t.subnets = []string{subnetID}
	default:
		t.subnets = []string{""}
	}
	t.market = "on-demand"
	if m := t.input.InstanceMarketOptions; m != nil && m.MarketType == types.MarketTypeSpot {
		t.market = "spot"
	}
	return t, nil
}
