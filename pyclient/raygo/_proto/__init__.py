"""gRPC stubs generated from protos/*.proto by scripts/gen-proto-python.sh. Do not edit."""
