"""Timeouts of pg.wait, ray.get and ray.wait: zero, fractional and negative, on a waiting
group and a created one."""

from compat_lib import connect, finish, outcome, placement_group, ray

connect("compat-timeouts")
created = placement_group([{"CPU": 1}])
ray.get(created.ready(), timeout=30)
waiting = placement_group([{"CPU": 100}])
returned = lambda value: {"returned": value}  # noqa: E731
outcome("pg_wait_zero_created", lambda: created.wait(0) or created.wait(5), normalize=returned)
outcome("pg_wait_negative_waiting", lambda: waiting.wait(-1), normalize=returned)
outcome("pg_wait_zero_waiting", lambda: waiting.wait(0), normalize=returned)
outcome("pg_wait_fraction_waiting", lambda: waiting.wait(0.5), normalize=returned)
outcome("get_zero_waiting", lambda: ray.get(waiting.ready(), timeout=0))
outcome("get_fraction_waiting", lambda: ray.get(waiting.ready(), timeout=0.2))
outcome("get_negative_created", lambda: ray.get(created.ready(), timeout=-1) == created, normalize=returned)
outcome("get_none_created", lambda: ray.get(created.ready(), timeout=None) == created, normalize=returned)
outcome("wait_zero_waiting", lambda: [len(x) for x in ray.wait([waiting.ready()], timeout=0)], normalize=returned)
outcome("wait_negative", lambda: ray.wait([waiting.ready()], timeout=-1))
outcome("wait_fraction_created", lambda: [len(x) for x in ray.wait([created.ready()], timeout=5.5)], normalize=returned)
ray.util.remove_placement_group(waiting)
ray.util.remove_placement_group(created)
finish()
