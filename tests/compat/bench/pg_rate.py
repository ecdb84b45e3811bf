"""The placement-group rates of `make bench-ray`, one script for both backends (Ray's API).

Run by tests/compat/bench.py with COMPAT_BACKEND=ray or raygo and RAY_ADDRESS naming the
cluster. Prints one `BENCH-RESULT {json}` line: the sequential create + ready + remove
rate of one {CPU: 0.01} bundle (one driver, after a warm-up), and the seconds until 1,000
groups created at once are all ready.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

BACKEND = os.environ.get("COMPAT_BACKEND", "raygo")
ray = importlib.import_module(BACKEND)
_pg = importlib.import_module(f"{BACKEND}.util.placement_group")
placement_group, remove_placement_group = _pg.placement_group, _pg.remove_placement_group

SEQUENTIAL = int(os.environ.get("BENCH_SEQUENTIAL", "1000"))
CONCURRENT = int(os.environ.get("BENCH_CONCURRENT", "1000"))
WARMUP = 50
BUNDLE = [{"CPU": 0.01}]


def cycle() -> None:
    pg = placement_group(BUNDLE)
    ray.get(pg.ready(), timeout=60)
    remove_placement_group(pg)


def main() -> None:
    ray.init(namespace="bench", _node_ip_address="127.0.0.1", logging_level="ERROR")
    for _ in range(WARMUP):
        cycle()
    start = time.perf_counter()
    for _ in range(SEQUENTIAL):
        cycle()
    rate = SEQUENTIAL / (time.perf_counter() - start)
    print(f"{BACKEND}: {rate:.0f} create+ready+remove per s", file=sys.stderr)

    # 1,000 groups at once: all created, then all waited for. Each takes 0.01 CPU of the
    # cluster's 16, so all fit.
    start = time.perf_counter()
    groups = [placement_group(BUNDLE) for _ in range(CONCURRENT)]
    ray.get([pg.ready() for pg in groups], timeout=600)
    concurrent_s = time.perf_counter() - start
    print(f"{BACKEND}: {CONCURRENT} concurrent groups ready in {concurrent_s:.2f} s", file=sys.stderr)
    for pg in groups:
        remove_placement_group(pg)
    print("BENCH-RESULT " + json.dumps({"rate_per_s": rate, "concurrent_ready_s": concurrent_s}))
    ray.shutdown()


if __name__ == "__main__":
    main()
