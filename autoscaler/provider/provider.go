// Package provider is the autoscaler's seam to the machines it launches: a small
// interface (Provider) that a cloud or a local launcher implements, the in-memory
// implementation the reconciler's tests use (Memory), and the names of the providers
// a cluster YAML may select.
package provider

import (
	"context"
	"errors"
	"time"
)

// Provider launches and terminates the instances of one cluster.
//
// Concurrency: every method may be called from any goroutine, but the reconciler calls
// them from its one loop, one at a time; an implementation must tolerate a call being
// abandoned (its context cancelled) and the same instance ids being terminated twice.
// Launch is asynchronous in the cloud sense: it returns once the provider has accepted
// the request, not once the machines run raygo.
type Provider interface {
	// Launch requests req.Count instances of req.NodeType and returns them (State
	// Pending or Running). All or none: on error no instance of the request is left
	// running. Errors that say the cloud lacks capacity wrap ErrCapacity.
	Launch(ctx context.Context, req LaunchRequest) ([]Instance, error)
	// Terminate ends the instances. Ids already gone are not an error.
	Terminate(ctx context.Context, ids []string) error
	// Instances lists every instance of the cluster that is not terminated, the ones
	// launched by an earlier run of the autoscaler included.
	Instances(ctx context.Context) ([]Instance, error)
}

// LaunchRequest is one call to Launch.
type LaunchRequest struct {
	// NodeType is the available_node_types key.
	NodeType string
	// NodeConfig is available_node_types.<t>.node_config, as the YAML gave it.
	NodeConfig map[string]any
	// Resources are what a node of the type offers, in Ray's wire form.
	Resources map[string]float64
	// GPUModel is the type's GPU machine model ("dgx-h100"), "" if none is known.
	GPUModel string
	// Labels are the node labels the instance's raylet registers with; they include
	// nodelabel.InstanceID once the provider has chosen the id, and nodelabel.NodeType.
	Labels map[string]string
	Count  int
	// RequestID identifies the request in logs and in the instances it creates.
	RequestID string
}

// InstanceState is the provider's view of an instance.
type InstanceState string

const (
	// InstancePending: accepted, not running yet.
	InstancePending InstanceState = "pending"
	// InstanceRunning: the machine runs (its raylet may not have registered yet).
	InstanceRunning InstanceState = "running"
)

// Instance is one machine of the cluster.
type Instance struct {
	ID       string
	NodeType string
	State    InstanceState
	// LaunchedAt is when Launch created it.
	LaunchedAt time.Time
	// RequestID is the LaunchRequest's.
	RequestID string
}

// ErrCapacity: the provider has no capacity for the type now (EC2's
// InsufficientInstanceCapacity); the autoscaler backs off the type and plans without it.
var ErrCapacity = errors.New("no capacity for the node type")

// Names of the provider.type values raygo implements.
const (
	// FakeMultinode is Ray's name for its local fake provider: every node is a real
	// `raygo start` raylet process on this machine.
	FakeMultinode = "fake_multinode"
	// AWS launches EC2 instances (autoscaler/provider/aws).
	AWS = "aws"
)
