#!/usr/bin/env bash
# make demo: a local cluster on the embedded in-memory store — a head and three raylets
# on this machine — its status and node list, a placement-group walk-through (one group
# per strategy and where its bundles went), then a clean stop.
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
for i in 1 2 3; do
  step "raygo start --address $RAYGO_ADDRESS (worker $i)"
  "$raygo" start --num-cpus 16 --resources '{"accelerator_x": 1}' \
    --labels "topology.raygo.io/rack=rack-$i,market=spot" --node-name "worker-$i"
done

step "raygo status"
"$raygo" status

step "raygo list nodes"
"$raygo" list nodes

step "go run ./examples/go/placement-groups (one group per strategy, where the bundles went)"
go run ./examples/go/placement-groups

step "raygo list placement-groups"
"$raygo" list placement-groups

step "raygo stop"
"$raygo" stop
trap - EXIT
echo
echo "Demo finished: a head and three raylets started, placement groups of every strategy reserved and removed, the cluster stopped."
