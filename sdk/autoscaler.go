package sdk

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// ResourceRequest is Ray's request_resources: capacity the autoscaler keeps the cluster
// able to hold at once, running work counting toward it. The zero value clears it.
type ResourceRequest struct {
	// NumCPUs adds NumCPUs bundles of {"CPU": 1}.
	NumCPUs int
	// Bundles are resource shapes that must all fit at once.
	Bundles []Bundle
	// BundleLabelSelectors is empty, or holds one label selector per bundle (Ray's
	// syntax: "value", "in(a,b)", "!value", "!in(a,b)"); an empty selector matches every
	// node.
	BundleLabelSelectors []map[string]string
}

// RequestResources asks the autoscaler to scale to fit req at once, bypassing its
// upscaling speed. Each call replaces the previous one; a zero req clears it. The GCS
// keeps the request (in its store) until it is replaced. Bad input is ErrInvalidArgument
// naming the field.
func (c *Client) RequestResources(ctx context.Context, req ResourceRequest) error {
	constraint, err := clusterResourceConstraint(req)
	if err != nil {
		return err
	}
	_, err = pb.NewAutoscalerStateServiceClient(c.conn).RequestClusterResourceConstraint(ctx,
		&pb.RequestClusterResourceConstraintRequest{ClusterResourceConstraint: constraint})
	if err != nil {
		return c.wrap("request resources", err)
	}
	return nil
}

// clusterResourceConstraint turns a request into the wire constraint: identical bundles
// (same resources and selector) are counted once, in the order they first appear.
func clusterResourceConstraint(req ResourceRequest) (*pb.ClusterResourceConstraint, error) {
	if req.NumCPUs < 0 {
		return nil, fmt.Errorf("%w: num_cpus: must be >= 0, got %d", ErrInvalidArgument, req.NumCPUs)
	}
	if len(req.BundleLabelSelectors) > 0 && len(req.BundleLabelSelectors) != len(req.Bundles) {
		return nil, fmt.Errorf("%w: bundle_label_selectors: %d selectors for %d bundles; give one per bundle", ErrInvalidArgument,
			len(req.BundleLabelSelectors), len(req.Bundles))
	}
	constraint := &pb.ClusterResourceConstraint{}
	byKey := map[string]*pb.ResourceRequestByCount{}
	add := func(bundle Bundle, selector map[string]string, count int64) {
		key := shapeKey(bundle, selector)
		if shape := byKey[key]; shape != nil {
			shape.Count += count
			return
		}
		shape := &pb.ResourceRequestByCount{Request: &pb.ResourceRequest{ResourcesBundle: maps.Clone(bundle), LabelSelector: maps.Clone(selector)}, Count: count}
		byKey[key] = shape
		constraint.ResourceRequests = append(constraint.ResourceRequests, shape)
	}
	if req.NumCPUs > 0 {
		add(Bundle{"CPU": 1}, nil, int64(req.NumCPUs))
	}
	for i, bundle := range req.Bundles {
		var selector map[string]string
		if len(req.BundleLabelSelectors) > 0 {
			selector = req.BundleLabelSelectors[i]
		}
		add(bundle, selector, 1)
	}
	return constraint, nil
}

// shapeKey is a bundle and its selector in one canonical string.
func shapeKey(bundle Bundle, selector map[string]string) string {
	var b strings.Builder
	names := make([]string, 0, len(bundle))
	for name := range bundle {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%q=%s,", name, strconv.FormatFloat(bundle[name], 'g', -1, 64))
	}
	b.WriteString("|")
	keys := make([]string, 0, len(selector))
	for key := range selector {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		fmt.Fprintf(&b, "%q=%q,", key, selector[key])
	}
	return b.String()
}
