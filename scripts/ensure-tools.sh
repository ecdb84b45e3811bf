#!/usr/bin/env bash
# Installs what the build and the tests need, only when it is missing (idempotent).
#   scripts/ensure-tools.sh redis      redis-server from Debian's packages
#   scripts/ensure-tools.sh protoc     protoc from Debian's packages, Go plugins with go install
#   scripts/ensure-tools.sh staticcheck
#   scripts/ensure-tools.sh chromium   Chromium from Debian's packages (the dashboard's browser tests)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.cache/bin"
mkdir -p "$tools"

# Versions pinned so that generated code is byte-identical on every machine.
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
STATICCHECK_VERSION=v0.8.2

apt_updated=0
apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "need root or sudo to apt-get install $*" >&2; exit 1; }
    sudo="sudo"
  fi
  if [ "$apt_updated" = 0 ]; then
    echo "==> apt-get update" >&2
    $sudo apt-get update -qq >&2
    apt_updated=1
  fi
  echo "==> apt-get install $*" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

go_install() { # name package@version
  local name=$1 pkg=$2
  local stamp="$tools/.$name-${pkg##*@}"
  if [ ! -x "$tools/$name" ] || [ ! -f "$stamp" ]; then
    echo "==> go install $pkg" >&2
    GOBIN="$tools" GOFLAGS=-mod=mod go install "$pkg" >&2
    rm -f "$tools/.$name-"*
    touch "$stamp"
  fi
}

for what in "$@"; do
  case "$what" in
    redis)
      command -v redis-server >/dev/null || apt_install redis-server
      ;;
    protoc)
      command -v protoc >/dev/null || apt_install protobuf-compiler
      go_install protoc-gen-go "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
      go_install protoc-gen-go-grpc "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
      ;;
    chromium)
      command -v chromium >/dev/null || apt_install chromium
      ;;
    staticcheck)
      go_install staticcheck "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
      ;;
    *)
      echo "ensure-tools: unknown tool $what (redis, protoc, staticcheck, chromium)" >&2
      exit 2
      ;;
  esac
done
