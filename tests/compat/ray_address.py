"""A script run the way Ray users run one: RAY_ADDRESS in the environment and ray.init()
with no address, or address="auto"."""

from compat_lib import connect, finish, record, run_driver

connect("compat-ray-address")
calls = {
    "no_address": 'ray.init(_node_ip_address="127.0.0.1", logging_level="ERROR")',
    "auto": 'ray.init(address="auto", _node_ip_address="127.0.0.1", logging_level="ERROR")',
}
for name, call in calls.items():
    out = run_driver(f"""
        import os
        from compat_lib import ray
        context = {call}
        print("connected", context.address_info["address"] == os.environ["RAY_ADDRESS"], len(ray.nodes()))
        ray.shutdown()
    """)
    record(name, out.split()[-3:] if "connected" in out else out)
finish()
