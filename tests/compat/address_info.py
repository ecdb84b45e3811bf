"""What ray.init returns: address_info's keys and the values a driver script reads."""

import os

from compat_lib import connect, finish, record, ray

RAY_KEYS = {"node_ip_address", "redis_address", "object_store_address", "raylet_socket_name", "webui_url",
            "session_dir", "metrics_export_port", "gcs_address", "address", "dashboard_agent_listen_port",
            "node_id"}
context = connect("compat-address-info")
info = context.address_info
record("ray_keys", sorted(RAY_KEYS & set(info)))
record("address", info["address"] == os.environ["RAY_ADDRESS"])
record("gcs_address", info["gcs_address"] == os.environ["RAY_ADDRESS"])
record("node_ip_address", info["node_ip_address"])
record("node_id_is_the_drivers", info["node_id"] == ray.get_runtime_context().get_node_id())
record("getitem", context["node_id"] == info["node_id"])
record("context_manager", hasattr(context, "__enter__") and hasattr(context, "__exit__"))
record("disconnect", callable(getattr(context, "disconnect", None)))
finish()
