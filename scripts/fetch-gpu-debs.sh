#!/bin/bash
# Downloads the Debian bookworm packages that a GPU host without package access needs to build and run
# vramlab next to an installed PyTorch (the host's LibTorch is used, so libtorch is not among them).
# Usage: scripts/fetch-gpu-debs.sh DIR (on a Debian bookworm machine with apt)    — then on the host: for f in DIR/*.deb; do dpkg -x "$f" PREFIX; done
# or let scripts/gpu-build.sh --debs DIR --prefix PREFIX do that and build against PREFIX/usr.
set -euo pipefail
dir=${1:?usage: fetch-gpu-debs.sh DIR}
mkdir -p "$dir"
cd "$dir"
packages=(
  libabsl-dev libabsl20220623 libc-ares-dev libc-ares2 libre2-9 libre2-dev libssl-dev libssl3
  libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 protobuf-compiler-grpc
  libprotobuf-dev libprotobuf-lite32 libprotobuf32 libprotoc32 protobuf-compiler
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
  civetweb libcivetweb-dev libcivetweb1 libcurl4-openssl-dev libcurl4
  libsqlite3-0 libsqlite3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  # For the test suite there (scripts/gpu-build.sh --test): Prometheus and promtool, zsh for the
  # completion test, xmllint for the report test.
  prometheus zsh zsh-common libxml2-utils
)
[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ] || apt-get update -qq
apt-get download "${packages[@]}" >/dev/null
ls | wc -l
du -sh .
