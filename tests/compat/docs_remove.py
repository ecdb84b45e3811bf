"""Ray docs, "Remove Placement Groups (Free Reserved Resources)": removing the group frees
its reserved resources, and (the docs' note) "actors or tasks that still use the reserved
resources are forcefully killed": the example's actor and a running task are kept in it."""

import os
import tempfile
import time

from compat_lib import (PlacementGroupSchedulingStrategy, connect, error_classes, finish, placement_group,
                        placement_group_table, ray, record, wait_until)

connect("compat-docs-remove")
free = ray.available_resources()["CPU"]
pg = placement_group([{"CPU": 2}])
ray.get(pg.ready())
record("reserved", wait_until("reserved", lambda: ray.available_resources().get("CPU") == free - 2))


@ray.remote(num_cpus=1)
class Actor:
    def __init__(self):
        pass

    def ready(self):
        pass


@ray.remote(num_cpus=0)
def busy(marker):
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    for _ in range(1200):  # bounded: removing the group kills it long before
        time.sleep(0.1)
    return "not killed"


actor = Actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg)).remote()
record("actor_ready", ray.get(actor.ready.remote(), timeout=30))
scratch = tempfile.mkdtemp(prefix="compat-docs-remove-")
in_group = PlacementGroupSchedulingStrategy(placement_group=pg)
markers = [os.path.join(scratch, name) for name in ("retried", "once")]
running = [busy.options(scheduling_strategy=in_group).remote(markers[0]),
           busy.options(scheduling_strategy=in_group, max_retries=0).remote(markers[1])]
record("tasks_started", wait_until("the tasks to start", lambda: all(os.path.exists(m) for m in markers), timeout=60))
pids = [int(open(m).read()) for m in markers]


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


# This API is asynchronous.
ray.util.remove_placement_group(pg)
# Wait until placement group is killed.
record("removed", wait_until("REMOVED", lambda: placement_group_table(pg)["state"] == "REMOVED"))
record("table_state", placement_group_table(pg)["state"])
# The running task and the actor are killed (a call may still be answered before the kill
# lands: ask until one fails, a bounded number of times).
record("task_workers_gone", [wait_until("worker gone", lambda: gone(pid), timeout=30) for pid in pids])
# Killed with max_retries=0: the same error on both.
try:
    ray.get(running[1], timeout=20)
    record("task_once", "returned")
except Exception as err:  # noqa: BLE001
    record("task_once", error_classes(err))
# Killed with retries left: Ray 2.60 keeps the retry pending on the removed group (get times
# out), raygo fails it with TaskPlacementGroupRemoved (README, compat): both a RayError, no result.
try:
    ray.get(running[0], timeout=20)
    record("task_retried", "returned")
except Exception as err:  # noqa: BLE001
    record("task_retried", ["raises", isinstance(err, ray.exceptions.RayError)])
died = None
for _ in range(50):
    try:
        ray.get(actor.ready.remote(), timeout=30)
    except Exception as err:  # noqa: BLE001
        died = [isinstance(err, ray.exceptions.RayActorError), error_classes(err)]
        break
    time.sleep(0.2)
record("actor_killed", died)
record("released", wait_until("released", lambda: ray.available_resources().get("CPU") == free))
finish()
