#!/usr/bin/env bash
# Installs everything modelgate needs to build, test and benchmark on Debian 12.
# Non-interactive and idempotent: when every package is already installed it only runs
# dpkg-query and exits, so test.sh and run.sh can call it every time at no cost.
set -euo pipefail

packages=(
    # toolchain
    build-essential cmake pkg-config git ca-certificates clang-format
    # libraries modelgated and the CLI link against
    libmicrohttpd-dev libsqlite3-dev libssl-dev libjansson-dev libarchive-dev
    libcurl4-openssl-dev libcmocka-dev
    # tools the tests and benchmarks drive: real sqlite3, openssl, nginx, archivers
    sqlite3 openssl jq curl zstd xz-utils zip unzip xxd nginx-light haproxy procps coreutils
)

# A package counts as present only when dpkg says "install ok installed"; half-installed or
# removed-but-configured packages need apt-get to fix them.
missing=()
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all ${#packages[@]} packages already installed"
    exit 0
fi

echo "install-deps: installing ${missing[*]}"

# apt-get needs root; use sudo only when we are not root and it exists, so the script also
# works in minimal containers that have no sudo at all.
as_root=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        as_root=(sudo --preserve-env=DEBIAN_FRONTEND)
    else
        echo "install-deps: not root and sudo is not installed; cannot install: ${missing[*]}" >&2
        exit 1
    fi
fi

# noninteractive keeps debconf from prompting (tzdata and friends on a fresh machine).
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update
"${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
