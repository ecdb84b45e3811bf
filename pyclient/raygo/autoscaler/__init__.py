"""Ray's ``ray.autoscaler`` for a raygo cluster: ``raygo.autoscaler.sdk.request_resources``."""

from raygo.autoscaler import sdk

__all__ = ["sdk"]
