"""The client's version and the raygo wire protocol it speaks."""

__version__ = "0.1.0"

# PROTOCOL_VERSION must equal internal/rpcutil.ProtocolVersion: every call carries it as
# the `raygo-protocol-version` metadata and the GCS refuses any other.
PROTOCOL_VERSION = 1
PROTOCOL_METADATA_KEY = "raygo-protocol-version"
