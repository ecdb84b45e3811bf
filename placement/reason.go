package placement

import (
	"fmt"
	"strconv"

	"github.com/raygo-dev/raygo/internal/resources"
)

// ReasonCode says why a node was rejected for a bundle. The values are stable: `raygo
// status`, the pending-group table and the autoscaler show and match them.
type ReasonCode string

const (
	// ReasonDead: the GCS has declared the node dead.
	ReasonDead ReasonCode = "dead"
	// ReasonDraining: the node is draining and takes no new bundles.
	ReasonDraining ReasonCode = "draining"
	// ReasonAlreadyHoldsBundle: STRICT_SPREAD, and the node already holds one of the
	// group's bundles (from Request.PlacedBundles or earlier in the same plan).
	ReasonAlreadyHoldsBundle ReasonCode = "already_holds_bundle"
	// ReasonNotGroupNode: STRICT_PACK rescheduling, and the group's other bundles are on
	// another node (Reason.GroupNode).
	ReasonNotGroupNode ReasonCode = "not_group_node"
	// ReasonLabelMismatch: the node fails the bundle's label selector (Reason.Label...).
	ReasonLabelMismatch ReasonCode = "label_mismatch"
	// ReasonInsufficientTotal: even with nothing else on it, the node has less of
	// Reason.Resource than the bundle asks; it could never hold it.
	ReasonInsufficientTotal ReasonCode = "insufficient_total"
	// ReasonInsufficientAvailable: the node has enough in total, but not free now.
	ReasonInsufficientAvailable ReasonCode = "insufficient_available"
	// ReasonNotGroupDomain: STRICT_PACK rescheduling of a group kept in a multi-node
	// NVLink domain (Reason.NVLinkDomain), and the node is not part of it.
	ReasonNotGroupDomain ReasonCode = "not_group_domain"
	// ReasonGPUsNotFree: the node has the GPU amount, but not as the bundle needs it:
	// fewer wholly free GPUs than whole GPUs asked (fractional bundles hold parts of the
	// others), or no single GPU with the fraction asked free. Want and Have are GPUs
	// (whole count, or the fraction and the most free on one GPU).
	ReasonGPUsNotFree ReasonCode = "gpus_not_free"
	// ReasonNVLinkIslandTooSmall: STRICT_PACK, and no NVLink island the node is part of
	// has as many GPUs as the group's whole GPUs (Want), even idle; Have is the largest.
	ReasonNVLinkIslandTooSmall ReasonCode = "nvlink_island_too_small"
	// ReasonNVLinkIslandBusy: STRICT_PACK, and the node's islands are large enough, but
	// none has Want GPUs free now; Have is the most free in one island.
	ReasonNVLinkIslandBusy ReasonCode = "nvlink_island_busy"
	// ReasonMIGProfileUnsupported: no MIG GPU of the node (Node.MIGGPUs) has the MIG
	// profile Resource asks for (the node has none, or only other models): it could
	// never hold the bundle.
	ReasonMIGProfileUnsupported ReasonCode = "mig_profile_unsupported"
	// ReasonMIGNoRoom: the node's MIG GPUs have the profile Resource, but held
	// instances (and the group's other MIG bundles) leave no placement for it now, even
	// with idle instances destroyed.
	ReasonMIGNoRoom ReasonCode = "mig_no_room"
	// ReasonMIGTooFewSlices: even with every instance gone, the node's MIG GPUs cannot
	// hold the group's MIG bundles with Resource among them (the capacity view).
	ReasonMIGTooFewSlices ReasonCode = "mig_too_few_slices"

	// The codes below are single-shape work's (ChooseNodes): they are a placement
	// group's state, not one node's, and appear as Choice.Cause. A hard node affinity
	// to a node missing from the ALIVE nodes is ReasonDead.

	// ReasonGroupNotReady: the work's placement group is not placed yet (PENDING), so no
	// bundle of it holds resources.
	ReasonGroupNotReady ReasonCode = "group_not_ready"
	// ReasonBundleNotPlaced: the group is placed, but the bundle asked for (or, for any
	// bundle, every bundle) has no ALIVE node now (lost, being placed again).
	ReasonBundleNotPlaced ReasonCode = "bundle_not_placed"
	// ReasonGroupRemoved: the work's placement group was removed; it can never run.
	ReasonGroupRemoved ReasonCode = "group_removed"
)

// Reason is one rejection of one node. Which fields are set depends on Code.
type Reason struct {
	Code ReasonCode

	// Resource, Want and Have: for the insufficient_* codes, the resource that is short,
	// what the bundle (or STRICT_PACK's sum) asks, and what the node can offer it:
	// available now, or for insufficient_total the total left beside this group's other
	// bundles on the node. Total is the node's total of Resource. For the mig_* codes,
	// Resource is the MIG profile ("nvidia.com/mig-1g.10gb") and Want is 1.
	Resource string
	Want     resources.Amount
	Have     resources.Amount
	Total    resources.Amount

	// Label, LabelSelector, NodeLabelValue, NodeHasLabel: for label_mismatch, the
	// selector's key and expression in Ray's syntax, and the node's value of the key.
	Label          string
	LabelSelector  string
	NodeLabelValue string
	NodeHasLabel   bool

	// GroupNode: for not_group_node, the node that holds the group's other bundles.
	GroupNode NodeID
	// NVLinkDomain: for not_group_domain, the domain that holds the group's bundles.
	NVLinkDomain string
}

// String is a short human form: "GPU total 8 < 16", "draining",
// `label "zone" is "b", selector wants in(a,c)`.
func (r Reason) String() string {
	switch r.Code {
	case ReasonDead:
		return "dead"
	case ReasonDraining:
		return "draining"
	case ReasonAlreadyHoldsBundle:
		return "already holds a bundle of this group"
	case ReasonNotGroupNode:
		return fmt.Sprintf("the group's other bundles are on node %s", ShortNodeID(r.GroupNode))
	case ReasonLabelMismatch:
		if !r.NodeHasLabel {
			return fmt.Sprintf("no label %s, selector wants %s", strconv.Quote(r.Label), r.LabelSelector)
		}
		return fmt.Sprintf("label %s is %s, selector wants %s", strconv.Quote(r.Label), strconv.Quote(r.NodeLabelValue), r.LabelSelector)
	case ReasonInsufficientTotal:
		if r.Have != r.Total {
			return fmt.Sprintf("%s total %s, %s left beside this group's other bundles, < %s", r.Resource, r.Total, r.Have, r.Want)
		}
		return fmt.Sprintf("%s total %s < %s", r.Resource, r.Have, r.Want)
	case ReasonInsufficientAvailable:
		return fmt.Sprintf("%s available %s < %s", r.Resource, r.Have, r.Want)
	case ReasonNotGroupDomain:
		return fmt.Sprintf("the group's other bundles are in NVLink domain %s", r.NVLinkDomain)
	case ReasonGPUsNotFree:
		if r.Want < resources.AmountScale {
			return fmt.Sprintf("most free on one GPU %s < %s", r.Have, r.Want)
		}
		return fmt.Sprintf("wholly free GPUs %s < %s", r.Have, r.Want)
	case ReasonNVLinkIslandTooSmall:
		return fmt.Sprintf("largest NVLink island %s GPUs < %s", r.Have, r.Want)
	case ReasonNVLinkIslandBusy:
		return fmt.Sprintf("most free GPUs in one NVLink island %s < %s", r.Have, r.Want)
	case ReasonMIGProfileUnsupported:
		return fmt.Sprintf("no MIG GPU with profile %s", r.Resource)
	case ReasonMIGNoRoom:
		return fmt.Sprintf("no room on the MIG GPUs for %s now", r.Resource)
	case ReasonMIGTooFewSlices:
		return fmt.Sprintf("the MIG GPUs, even empty, have no room for %s", r.Resource)
	case ReasonGroupNotReady:
		return "placement group not placed yet"
	case ReasonBundleNotPlaced:
		return "bundle has no ALIVE node"
	case ReasonGroupRemoved:
		return "placement group removed"
	default:
		return string(r.Code)
	}
}
