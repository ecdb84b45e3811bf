#!/usr/bin/env bash
# Generates the Python code of protos/*.proto into OUT (default pyclient/raygo/_proto) with
# the grpcio-tools pinned in pyclient/requirements-dev.txt (run `make venv` first), and makes
# the generated imports package-relative so the stubs live inside the raygo package.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/pyclient/raygo/_proto}
python=${RAYGO_VENV_PYTHON:-$root/.venv/bin/python}
if ! "$python" -c 'import grpc_tools' 2>/dev/null; then
  echo "gen-proto-python: $python has no grpcio-tools: run 'make venv'" >&2
  exit 1
fi
mkdir -p "$out"
rm -f "$out"/*_pb2.py "$out"/*_pb2.pyi "$out"/*_pb2_grpc.py
cd "$root/protos"
"$python" -m grpc_tools.protoc -I . \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  ./*.proto
# protoc writes `import common_pb2 as common__pb2`, which only works with _proto on sys.path.
sed -i -E 's/^import ([A-Za-z0-9_]+_pb2) as /from . import \1 as /' "$out"/*_pb2.py "$out"/*_pb2.pyi "$out"/*_pb2_grpc.py
cat > "$out/__init__.py" <<'PY'
"""gRPC stubs generated from protos/*.proto by scripts/gen-proto-python.sh. Do not edit."""
PY
