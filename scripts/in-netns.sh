#!/usr/bin/env bash
# in-netns.sh [--or-here] COMMAND [ARG...]: runs COMMAND in a new network namespace with
# loopback up (unshare -n as root, else unshare -rn in a user namespace) and
# RAYGO_OWN_NETNS=1 in its environment: the namespace is the run's own, so the command may
# add links and namespaces beside it, and nothing it starts reaches anything but them.
# If no namespace can be created it stops, saying so; with --or-here it runs COMMAND here
# instead, without RAYGO_OWN_NETNS.
set -euo pipefail
here=0
if [ "${1:-}" = "--or-here" ]; then
  here=1
  shift
fi
netns=()
for candidate in "unshare -n" "unshare -rn"; do
  # shellcheck disable=SC2086 # the candidate is a command and its flags
  if $candidate ip link set lo up 2>/dev/null; then
    read -r -a netns <<< "$candidate"
    break
  fi
done
if [ ${#netns[@]} -eq 0 ]; then
  if [ "$here" = 1 ]; then
    echo "in-netns: cannot create a network namespace (unshare -n / unshare -rn, and ip from iproute2); running here" >&2
    exec "$@"
  fi
  echo "in-netns: cannot create a network namespace with loopback up (unshare -n / unshare -rn, and ip from iproute2); not running $1" >&2
  exit 1
fi
# shellcheck disable=SC2016 # expanded by the inner shell
exec "${netns[@]}" env RAYGO_OWN_NETNS=1 bash -c 'ip link set lo up && exec "$@"' in-netns "$@"
