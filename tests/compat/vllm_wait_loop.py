"""Shaped like vLLM's _wait_until_pg_ready: ray.wait in a loop with a timeout, logging while
the group waits, for a group that is created later (once another is removed)."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, remove_placement_group, ray

connect("compat-vllm-wait")
blocker = placement_group([{"CPU": 4}] * 4, strategy="STRICT_SPREAD")
ray.get(blocker.ready(), timeout=60)
pg = placement_group([{"CPU": 2}] * 2, strategy="PACK")
polls = []
for attempt in range(3):
    ready, _ = ray.wait([pg.ready()], timeout=1)
    polls.append(len(ready))
record("polls_while_blocked", polls)
record("scheduling_state", placement_group_table(pg)["stats"]["scheduling_state"])
remove_placement_group(blocker)
ready, _ = ray.wait([pg.ready()], timeout=30)
record("ready_after_release", len(ready))
remove_placement_group(pg)
finish()
