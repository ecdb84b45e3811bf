"""Ray's two autoscaler planners, called in process on the demand sets of
tests/compat/bench/autoscaler_cost (make bench-ray): for each set, the node counts per
type that Ray v1 (ResourceDemandScheduler.get_nodes_to_launch) and Ray v2
(ray.autoscaler.v2.scheduler.ResourceDemandScheduler.schedule) launch on an empty
cluster. No Ray cluster runs: the planners are pure enough to call directly, so this
needs no network namespace.

    autoscaler_cost_ray.py SETS_JSON OUT_JSON

Ray gets exactly the set's node types (resources, min_workers 0, max_workers) and no
prices: Ray has no notion of price (it ranks types with its own utilization scorer, and
`priority` only breaks ties in v2), so we do not translate prices into priorities: the
comparison is of the nodes each planner chooses, priced afterwards by the set's prices.
Both planners run with their upscaling throttle lifted (upscaling_speed 1e6), as raygo
does, so each answer is the whole plan for the demand, not a first step.
"""

import json
import logging
import sys

from ray.autoscaler._private.node_provider_availability_tracker import (
    NodeAvailabilitySummary,
)
from ray.autoscaler._private.resource_demand_scheduler import (
    ResourceDemandScheduler as SchedulerV1,
)
from ray.autoscaler.tags import (
    NODE_KIND_HEAD,
    TAG_RAY_NODE_KIND,
    TAG_RAY_USER_NODE_TYPE,
)
from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler as SchedulerV2
from ray.autoscaler.v2.scheduler import SchedulingRequest
from ray.core.generated import autoscaler_pb2, common_pb2, gcs_pb2

# Ray's v1 expects the head among the cluster's nodes (it launches one otherwise): the
# cluster is that head alone, offering nothing (num_cpus=0, the usual head of an
# autoscaling cluster), as raygo's input has it.
HEAD = "ray.head.default"
HEAD_ID, HEAD_IP = "head-0", "10.0.0.1"
UPSCALING_SPEED = 1e6
# The GCS names a placement group's affinity label _PG_<hex id>
# (FormatPlacementGroupLabelName in Ray's protobuf_utils.h).
PG_LABEL_PREFIX = "_PG_"


def pg_hex(group_index):
    # A placement group id is 18 bytes; any distinct hex string serves as a label.
    return "%036x" % (group_index + 1)


class HeadOnlyProvider:
    """The two NodeProvider calls v1's planner makes, for a cluster of the head alone."""

    def node_tags(self, node_id):
        return {TAG_RAY_NODE_KIND: NODE_KIND_HEAD, TAG_RAY_USER_NODE_TYPE: HEAD}

    def internal_ip(self, node_id):
        return HEAD_IP


def plan_v1(demand_set):
    node_types = {
        HEAD: {"resources": {}, "min_workers": 0, "max_workers": 0, "node_config": {}}
    }
    max_workers = 0
    for t in demand_set["types"]:
        node_types[t["name"]] = {
            "resources": dict(t["resources"]),
            "min_workers": 0,
            "max_workers": t["max_workers"],
            "node_config": {},
        }
        max_workers += t["max_workers"]
    scheduler = SchedulerV1(
        HeadOnlyProvider(), node_types, max_workers, HEAD, UPSCALING_SPEED
    )
    demands = []
    for task in demand_set["tasks"]:
        demands += [dict(task["shape"]) for _ in range(task["count"])]
    groups = []
    for i, group in enumerate(demand_set["groups"] or []):
        pg = gcs_pb2.PlacementGroupTableData(
            placement_group_id=bytes.fromhex(pg_hex(i)),
            strategy=common_pb2.PlacementStrategy.Value(group["strategy"]),
            state=gcs_pb2.PlacementGroupTableData.PENDING,
        )
        for b, bundle in enumerate(group["bundles"]):
            pg.bundles.add(unit_resources=bundle).bundle_id.bundle_index = b
        groups.append(pg)
    to_launch, _ = scheduler.get_nodes_to_launch(
        nodes=[HEAD_ID],
        launching_nodes={},
        resource_demands=demands,
        unused_resources_by_ip={HEAD_IP: {}},
        pending_placement_groups=groups,
        max_resources_by_ip={HEAD_IP: {}},
        ensure_min_cluster_size=[],
        node_availability_summary=NodeAvailabilitySummary(node_availabilities={}),
    )
    return {name: count for name, count in to_launch.items() if count > 0}


def gang_request(index, group):
    """A pending placement group as the GCS reports it to the v2 autoscaler
    (GcsAutoscalerStateManager::GetPendingGangResourceRequests): one ResourceRequest
    per bundle, with an affinity constraint on _PG_<id> for STRICT_PACK, an
    anti-affinity one for STRICT_SPREAD and none for PACK and SPREAD
    (GenPlacementConstraintForPlacementGroup); details "<id>:<strategy>|<state>"."""
    label = PG_LABEL_PREFIX + pg_hex(index)
    requests = []
    for bundle in group["bundles"]:
        request = autoscaler_pb2.ResourceRequest(resources_bundle=bundle)
        if group["strategy"] == "STRICT_PACK":
            request.placement_constraints.add().affinity.CopyFrom(
                autoscaler_pb2.AffinityConstraint(label_name=label, label_value="")
            )
        elif group["strategy"] == "STRICT_SPREAD":
            request.placement_constraints.add().anti_affinity.CopyFrom(
                autoscaler_pb2.AntiAffinityConstraint(label_name=label, label_value="")
            )
        requests.append(request)
    gang = autoscaler_pb2.GangResourceRequest(
        details="%s:%s|PENDING" % (pg_hex(index), group["strategy"])
    )
    gang.bundle_selectors.add().resource_requests.extend(requests)
    return gang


def plan_v2(demand_set):
    configs = {}
    max_nodes = 0
    for t in demand_set["types"]:
        configs[t["name"]] = NodeTypeConfig(
            name=t["name"],
            min_worker_nodes=0,
            max_worker_nodes=t["max_workers"],
            resources=dict(t["resources"]),
        )
        max_nodes += t["max_workers"]
    request = SchedulingRequest(
        disable_launch_config_check=True,
        node_type_configs=configs,
        max_num_nodes=max_nodes,
        resource_requests=[
            autoscaler_pb2.ResourceRequestByCount(
                request=autoscaler_pb2.ResourceRequest(resources_bundle=task["shape"]),
                count=task["count"],
            )
            for task in demand_set["tasks"]
        ],
        gang_resource_requests=[
            gang_request(i, g) for i, g in enumerate(demand_set["groups"] or [])
        ],
    )
    reply = SchedulerV2().schedule(request)
    counts = {}
    for launch in reply.to_launch:
        counts[launch.instance_type] = counts.get(launch.instance_type, 0) + launch.count
    return counts


def run(planner, demand_set):
    try:
        return {"set": demand_set["id"], "counts": planner(demand_set)}
    except Exception as error:  # a refusal is reported per set, never hidden
        return {"set": demand_set["id"], "counts": {}, "error": repr(error)[:300]}


def main():
    sets_path, out_path = sys.argv[1], sys.argv[2]
    logging.disable(logging.WARNING)  # v1 logs every unfulfilled demand at WARNING
    with open(sets_path) as f:
        sets = json.load(f)["sets"]
    out = {
        "ray_v1": [run(plan_v1, s) for s in sets],
        "ray_v2": [run(plan_v2, s) for s in sets],
    }
    with open(out_path, "w") as f:
        json.dump(out, f)
    for name in ("ray_v1", "ray_v2"):
        errors = [e for e in out[name] if "error" in e]
        print("%s: %d sets, %d raised%s" % (name, len(sets), len(errors),
              (": first " + errors[0]["error"]) if errors else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
