"""Writes the golden `ray status` texts raygo's formatter is checked against.

For each scenario in cmd/raygo/testdata/status/*.json (a raygo GetClusterStatus reply in
protobuf JSON, and the time of the request), it builds Ray 2.60's own
GetClusterStatusReply from the same fields, and formats it with Ray's own
ClusterStatusParser and ClusterStatusFormatter (the code of `ray status`), into
<scenario>.golden beside it (and `ray status -v`'s into <scenario>.verbose.golden). Run it with Ray installed (`make compat` installs it in
.venv-ray/) and TZ=UTC, as the Go test reads the goldens in UTC:

    TZ=UTC .venv-ray/bin/python tests/compat/status_golden.py
"""

import json
import pathlib
import sys

from ray.autoscaler.v2.schema import Stats
from ray.autoscaler.v2.utils import ClusterStatusFormatter, ClusterStatusParser
from ray.core.generated import autoscaler_pb2 as ray

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "cmd" / "raygo" / "testdata" / "status"


def request(r):
    return ray.ResourceRequest(resources_bundle={k: float(v) for k, v in r.get("resourcesBundle", {}).items()})


def by_count(r):
    return ray.ResourceRequestByCount(request=request(r.get("request", {})), count=int(r.get("count", 0)))


def node(n):
    return ray.NodeState(
        node_id=bytes.fromhex(n["nodeId"]),
        instance_id=n.get("instanceId", ""),
        ray_node_type_name=n.get("rayNodeTypeName", ""),
        available_resources={k: float(v) for k, v in n.get("availableResources", {}).items()},
        total_resources={k: float(v) for k, v in n.get("totalResources", {}).items()},
        status=ray.NodeStatus.Value(n.get("status", "NODE_STATUS_UNSPECIFIED").removeprefix("NODE_STATUS_")),
        idle_duration_ms=int(n.get("idleDurationMs", 0)),
        node_ip_address=n.get("nodeIpAddress", ""),
        node_activity=n.get("nodeActivity", []),
    )


def reply(data):
    state = data.get("clusterResourceState", {})
    scaling = data.get("autoscalingState")
    out = ray.GetClusterStatusReply(cluster_resource_state=ray.ClusterResourceState(
        cluster_resource_state_version=int(state.get("clusterResourceStateVersion", 0)),
        node_states=[node(n) for n in state.get("nodeStates", [])],
        pending_resource_requests=[by_count(r) for r in state.get("pendingResourceRequests", [])],
        pending_gang_resource_requests=[
            ray.GangResourceRequest(requests=[request(r) for r in g.get("requests", [])], details=g.get("details", ""))
            for g in state.get("pendingGangResourceRequests", [])],
        cluster_resource_constraints=[
            ray.ClusterResourceConstraint(resource_requests=[by_count(r) for r in c.get("resourceRequests", [])])
            for c in state.get("clusterResourceConstraints", [])],
    ))
    if scaling is not None:
        out.autoscaling_state.CopyFrom(ray.AutoscalingState(
            autoscaler_state_version=int(scaling.get("autoscalerStateVersion", 0)),
            pending_instance_requests=[
                ray.PendingInstanceRequest(instance_type_name=r.get("instanceTypeName", ""), ray_node_type_name=r.get("rayNodeTypeName", ""),
                                           count=int(r.get("count", 0)), request_ts=int(r.get("requestTs", 0)))
                for r in scaling.get("pendingInstanceRequests", [])],
            pending_instances=[
                ray.PendingInstance(instance_type_name=p.get("instanceTypeName", ""), ray_node_type_name=p.get("rayNodeTypeName", ""),
                                    instance_id=p.get("instanceId", ""), ip_address=p.get("ipAddress", ""), details=p.get("details", ""))
                for p in scaling.get("pendingInstances", [])],
            failed_instance_requests=[
                ray.FailedInstanceRequest(instance_type_name=f.get("instanceTypeName", ""), ray_node_type_name=f.get("rayNodeTypeName", ""),
                                          count=int(f.get("count", 0)), reason=f.get("reason", ""),
                                          start_ts=int(f.get("startTs", 0)), failed_ts=int(f.get("failedTs", 0)))
                for f in scaling.get("failedInstanceRequests", [])],
        ))
    return out


def main():
    scenarios = sorted(SCENARIOS.glob("*.json"))
    if not scenarios:
        sys.exit(f"no scenarios in {SCENARIOS}")
    for path in scenarios:
        scenario = json.loads(path.read_text())
        status = ClusterStatusParser.from_get_cluster_status_reply(reply(scenario["reply"]), Stats(request_ts_s=scenario["now"]))
        for verbose, suffix in ((False, ".golden"), (True, ".verbose.golden")):
            out = path.with_suffix(suffix)
            out.write_text(ClusterStatusFormatter.format(status, verbose=verbose) + "\n")
            print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
