"""Ray docs, "Use labels to control scheduling": label_selector on tasks and actors
(`@ray.remote(label_selector=...)`, `.options(label_selector=...)`, with values, in(), !
and !in()), and NodeLabelSchedulingStrategy's In, NotIn, Exists and DoesNotExist, hard and
soft. The compat cluster's nodes carry zone a (head), b, c and c."""

from compat_lib import _strategies, connect, finish, outcome, ray, record

NodeLabelSchedulingStrategy = _strategies.NodeLabelSchedulingStrategy
In, NotIn, Exists, DoesNotExist = _strategies.In, _strategies.NotIn, _strategies.Exists, _strategies.DoesNotExist

connect("compat-docs-labels-tasks")
zone_of = {n["NodeID"]: n["Labels"].get("zone") for n in ray.nodes() if n["Alive"]}


@ray.remote(num_cpus=1, label_selector={"zone": "b"})
def in_zone_b():
    return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=1)
def node_id():
    return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=0, label_selector={"zone": "!in(a,b)"})
class Actor:
    def node_id(self):
        return ray.get_runtime_context().get_node_id()


def zones(refs, allowed):
    """Whether every ref ran in an allowed zone (which of them is the scheduler's choice)."""
    return {zone_of[n] for n in ray.get(refs, timeout=120)} <= set(allowed)


record("decorator", zones([in_zone_b.remote() for _ in range(4)], "b"))
cases = {
    "value": ({"zone": "c"}, "c"),
    "in": ({"zone": "in(a,b)"}, "ab"),
    "not": ({"zone": "!c"}, "ab"),
    "not_in": ({"zone": "!in(a,b)"}, "c"),
}
for name, (selector, allowed) in cases.items():
    record("task_" + name, zones([node_id.options(label_selector=selector).remote() for _ in range(4)], allowed))
strategies = {
    "hard_in": (NodeLabelSchedulingStrategy({"zone": In("b")}), "b"),
    "hard_not_in": (NodeLabelSchedulingStrategy({"zone": NotIn("a", "b")}), "c"),
    "hard_exists": (NodeLabelSchedulingStrategy({"zone": Exists()}), "abc"),
}
for name, (strategy, allowed) in strategies.items():
    record("strategy_" + name, zones([node_id.options(scheduling_strategy=strategy).remote() for _ in range(4)], allowed))
actor = Actor.remote()
record("actor", zones([actor.node_id.remote()], "c"))
record("actor_options", zones([Actor.options(label_selector={"zone": "a"}).remote().node_id.remote()], "a"))
# A selector no node matches: the task waits.
outcome("unmatched_wait", lambda: ray.get(node_id.options(label_selector={"zone": "mars"}).remote(), timeout=3))
outcome("unmatched_does_not_exist", lambda: ray.get(
    node_id.options(scheduling_strategy=NodeLabelSchedulingStrategy({"zone": DoesNotExist()})).remote(), timeout=3))
finish()
