#!/bin/bash
# Installs the Debian bookworm packages that building and testing vramlab needs (as root).
# Packages already present are left alone, so a second run costs one dpkg query.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  prometheus-cpp-dev libsqlite3-dev sqlite3 nlohmann-json3-dev libgtest-dev libgmock-dev
  libtorch-dev libgloo-dev prometheus chromium curl python3 libxml2-utils python3-yaml python3-grpcio
  python3-torch
  libcli11-dev openssl zsh bash-completion clang-format-14
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
