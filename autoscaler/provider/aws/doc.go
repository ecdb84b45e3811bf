// Package aws is the provider Ray calls aws: it launches the cluster's worker nodes as
// EC2 instances (AWS SDK for Go v2) and finds and terminates them by their tags.
//
// A launch of N nodes of a type is one RunInstances call with MinCount = MaxCount = N
// (EC2 starts all or none), in the first of the type's subnets that has capacity. The
// node_config is Ray's: the RunInstances parameters as boto3 names them (nodeconfig.go),
// plus Ray's SubnetIds. Every instance carries Ray's tags (ray-cluster-name,
// ray-node-type, ray-user-node-type, ray-node-name) and raygo-launch-request, and a user
// data script (userdata.go) that runs the cluster YAML's initialization and setup
// commands and then `raygo start --block` joining the head's GCS, with the instance id
// from the instance metadata as its autoscaler.raygo.io/instance-id label.
//
// Capacity errors mark the offering (market, instance type, zone) unavailable for three
// minutes, as Karpenter does (capacity.go): the launch tries the next subnet, and
// fails with provider.ErrCapacity when none is left. Any other error is one line naming
// the node type, the instance type and EC2's error code; the instances a failed launch
// may have created are found by their launch-request tag and terminated.
package aws
