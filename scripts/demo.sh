#!/usr/bin/env bash
# make demo: a local cluster on the embedded in-memory store — a head and three raylets
# with simulated GPU servers on this machine — its status and node list, a
# placement-group walk-through (one group per strategy, GPU groups with their GPUs, where
# the bundles went) from Go and from Python (.venv/, `make venv`), Go actors and tasks
# inside placement groups, then a clean stop; then the autoscaler: `raygo up` of a cluster
# YAML, a gang that makes it launch a simulated DGX node, `raygo status`, `raygo down`.
set -euo pipefail
cd "$(dirname "$0")/.."
raygo=bin/raygo
port=${RAYGO_DEMO_PORT:-6380}
export RAYGO_TEMP_DIR=${RAYGO_TEMP_DIR:-$(mktemp -d /tmp/raygo-demo.XXXXXX)}
export RAYGO_ADDRESS=127.0.0.1:$port

cleanup() { "$raygo" stop >/dev/null 2>&1 || true; }
trap cleanup EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "raygo start --head --port $port (GCS + head raylet, in-memory store)"
"$raygo" start --head --port "$port" --num-cpus 8 --labels topology.raygo.io/rack=rack-0
# Three simulated GPU servers (no GPU needed: go-nvml's mock servers, filled in to
# describe each machine): two DGX H100 (8 GPUs on one NVSwitch, GPU i on rail i) in one
# scalable unit, the second with GPU 0 in MIG mode, and a PCIe server whose GPUs are
# NVLink-bridged in pairs.
step "raygo start --address $RAYGO_ADDRESS --gpu-sim dgx-h100 (worker 1)"
"$raygo" start --num-cpus 16 --gpu-sim dgx-h100 \
  --labels "topology.raygo.io/su=su-1,topology.raygo.io/rack=rack-1,market=spot" --node-name dgx-h100-1
step "raygo start --address $RAYGO_ADDRESS --gpu-sim dgx-h100 --mig 0:on (worker 2: GPU 0 in MIG mode)"
"$raygo" start --num-cpus 16 --gpu-sim dgx-h100 --mig 0:on \
  --labels "topology.raygo.io/su=su-1,topology.raygo.io/rack=rack-2,market=spot" --node-name dgx-h100-2
step "raygo start --address $RAYGO_ADDRESS --gpu-sim pcie-8gpu-nvlink-pairs (worker 3)"
"$raygo" start --num-cpus 16 --gpu-sim pcie-8gpu-nvlink-pairs --labels "topology.raygo.io/su=su-2" --node-name pcie-pairs-1

step "raygo status"
"$raygo" status

step "raygo list nodes"
"$raygo" list nodes

step "go run ./examples/go/placement-groups (one group per strategy, where the bundles went)"
go run ./examples/go/placement-groups

step "python examples/python/placement_groups.py (the same from Python, with Ray's API)"
.venv/bin/python examples/python/placement_groups.py

step "go run ./examples/go/actors -gpus 1 (a counter actor in a STRICT_PACK group of GPU bundles)"
go run ./examples/go/actors -gpus 1

step "go run ./examples/go/tasks (a fan-out of tasks over a SPREAD group)"
go run ./examples/go/tasks

step "raygo list placement-groups"
"$raygo" list placement-groups

step "raygo list actors (the walk-through's actors, DEAD once their group was removed)"
"$raygo" list actors

step "raygo stop"
"$raygo" stop

# The autoscaler: a cluster from a Ray cluster YAML whose nodes are local processes
# (fake_multinode), grown for a gang no node holds and shrunk when idle.
step "raygo up examples/autoscaler/local-gpu.yaml --yes (head + autoscaler, waits for min_workers)"
"$raygo" up examples/autoscaler/local-gpu.yaml --yes --port "$port"

step "python examples/python/autoscaling.py (a STRICT_PACK of 8 GPUs launches a DGX H100 node)"
.venv/bin/python examples/python/autoscaling.py

step "raygo status (the autoscaler's sections)"
"$raygo" status

step "raygo down examples/autoscaler/local-gpu.yaml --yes"
"$raygo" down examples/autoscaler/local-gpu.yaml --yes --port "$port"
trap - EXIT
echo
echo "Demo finished: a head and three raylets started, placement groups of every strategy reserved and removed, actors and tasks run inside them, the cluster stopped; then a cluster from a Ray cluster YAML grew a DGX node for a gang and was taken down."
