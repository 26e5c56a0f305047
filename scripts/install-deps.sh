#!/usr/bin/env bash
# Installs what modelgate needs on Debian 12.
# Non-interactive and idempotent: when every package is already installed (and the tests'
# node_modules exists) it only runs dpkg-query and exits, so test.sh and run.sh can call it
# every time at no cost.
#
# Usage: scripts/install-deps.sh [--server] [--fuzz] [--bench] [--list]
#   (none)    everything to build, test and benchmark: the server's packages plus the tools the
#             tests drive (nginx, HAProxy, Chromium, Node, ...)
#   --server  only what building and running modelgated and the CLI needs (scripts/run.sh)
#   --fuzz, --bench  the optional lists, asked for by the scripts that need them
#             (tests/fuzz/run.sh asks for --fuzz, bench/read.sh for --bench)
#   --list    print the packages that would be checked, one a line, and install nothing
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# What building and running the server and the CLI needs, and nothing else.
server_packages=(
    # toolchain
    build-essential cmake pkg-config ca-certificates
    # libraries modelgated and the CLI link against
    libmicrohttpd-dev libsqlite3-dev libssl-dev libjansson-dev libarchive-dev
    libcurl4-openssl-dev
    # OpenID Connect: JWS and JWK handling for single sign-on and trusted publishing (identity/)
    libcjose-dev
    # PostgreSQL's client library: --database postgresql://… (several replicas)
    libpq-dev
    # ONNX graphs (artifact/onnx.c): protoc-c compiles the onnx.proto that python3-onnx
    # installs at build time, libprotobuf-c decodes with it
    protobuf-c-compiler libprotobuf-c-dev python3-onnx
    # model cards (api/markdown.c): cmark, the CommonMark reference implementation
    libcmark-dev
)

# What the test suite adds.
test_packages=(
    git clang-format
    # CI also builds Release with clang, besides gcc
    clang
    # the unit and integration test framework
    libcmocka-dev
    # tools the tests and benchmarks drive: real sqlite3, openssl, nginx, archivers
    sqlite3 openssl jq curl zstd xz-utils zip unzip xxd nginx-light haproxy procps coreutils
    # the OCI client the registry tests pull with (tests/integration/test_oci.c)
    skopeo
    # promtool checks that /metrics stays parsable whatever clients send (tests/security)
    prometheus
    # a private PostgreSQL 15 the tests start themselves (scripts/pg-test.sh), never the
    # system service; util-linux's setpriv runs it as nobody when the tests run as root
    postgresql util-linux
    # the reviewer UI's end-to-end tests: headless Chromium, driven by playwright-core from npm
    chromium
    # ONNX's own test models (tests/unit/artifact/test_onnx.c reads every one and compares
    # with what python3-onnx reads; the tests build their models with python3-onnx/numpy)
    libonnx-testdata python3-numpy
    # the artifact scanner's corpus (tests/unit/artifact/test_scan_corpus.c): real torch.save
    # checkpoints and np.save files, built with Debian's /usr/bin/python3, never loaded
    python3-torch
    # blob backends (scripts/blob-test.sh): an OCI registry (distribution 2.8) the tests start
    # themselves, never the system service; skopeo and awscli read what modelgated stored;
    # python3 picks free ports and hashes the test registry's htpasswd
    docker-registry skopeo awscli python3
    # the Python client (clients/python) is installed offline by Debian's pip in its e2e test
    python3-pip python3-setuptools python3-wheel
)

server_only=0
list_only=0
extra=()
# Node.js may already come from elsewhere (NodeSource's nodejs bundles npm and conflicts with
# Debian's npm package), so Debian's nodejs and npm are asked for only when the commands are
# missing.
node_packages=()
if ! command -v node >/dev/null 2>&1; then
    node_packages+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
    node_packages+=(npm)
fi

# Optional: libFuzzer targets (tests/fuzz/) need clang and its runtime (libclang_rt.fuzzer).
fuzz_packages=(clang libclang-rt-14-dev)
# Optional: bench/read.sh drives wrk.
bench_packages=(wrk)

for arg in "$@"; do
    case "$arg" in
    --server) server_only=1 ;;
    --list) list_only=1 ;;
    --fuzz) extra+=("${fuzz_packages[@]}") ;;
    --bench) extra+=("${bench_packages[@]}") ;;
    *)
        echo "usage: $0 [--server] [--fuzz] [--bench] [--list]" >&2
        exit 2
        ;;
    esac
done

packages=("${server_packages[@]}")
if [[ $server_only -eq 0 ]]; then
    packages+=("${test_packages[@]}" "${node_packages[@]}")
fi
packages+=("${extra[@]}")

if [[ $list_only -eq 1 ]]; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi

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
else
    echo "install-deps: installing ${missing[*]}"

    # apt-get needs root; use sudo only when we are not root and it exists, so the script
    # also works in minimal containers that have no sudo at all.
    as_root=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1; then
            as_root=(sudo --preserve-env=DEBIAN_FRONTEND,UCF_FORCE_CONFFOLD)
        else
            echo "install-deps: not root and sudo is not installed; cannot install: ${missing[*]}" >&2
            exit 1
        fi
    fi

    # noninteractive keeps debconf from prompting (tzdata and friends on a fresh machine).
    export DEBIAN_FRONTEND=noninteractive
    # Debian's postgresql package would create and start a system cluster; the tests start
    # their own (scripts/pg-test.sh), so say no cluster before the package is configured.
    if [[ " ${missing[*]} " == *" postgresql "* && ! -e /etc/postgresql-common/createcluster.conf ]]; then
        "${as_root[@]}" mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" | "${as_root[@]}" tee \
            /etc/postgresql-common/createcluster.conf >/dev/null
    fi
    # postgresql-common installs that file through ucf: keep ours, never ask.
    export UCF_FORCE_CONFFOLD=1
    # docker-registry's package would start a system registry on port 5000; the tests start
    # their own (scripts/blob-test.sh). A policy-rc.d that says no keeps invoke-rc.d and
    # deb-systemd-invoke from starting it while we install; the unit is disabled after.
    policy_added=0
    if [[ " ${missing[*]} " == *" docker-registry "* && ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee /usr/sbin/policy-rc.d >/dev/null
        "${as_root[@]}" chmod 755 /usr/sbin/policy-rc.d
        policy_added=1
    fi
    "${as_root[@]}" apt-get update
    "${as_root[@]}" apt-get install -y --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
    if [[ $policy_added -eq 1 ]]; then
        "${as_root[@]}" rm -f /usr/sbin/policy-rc.d
    fi
    if [[ " ${missing[*]} " == *" docker-registry "* && -d /run/systemd/system ]]; then
        "${as_root[@]}" systemctl disable --now docker-registry >/dev/null 2>&1 || true
    fi
fi

# The tests' npm packages, exactly as tests/ui/package-lock.json pins them: playwright-core
# drives the Chromium installed above (it downloads no browser of its own), standardwebhooks
# verifies webhook deliveries, @redocly/cli lints the OpenAPI document.
npm_ok=1
[[ $server_only -eq 1 ]] && exit 0
for mod in playwright-core standardwebhooks @redocly/cli; do
    [[ -d "$root/tests/ui/node_modules/$mod" ]] || npm_ok=0
done
if [[ $npm_ok -eq 0 ]]; then
    echo "install-deps: npm ci in tests/ui"
    (cd "$root/tests/ui" && npm ci --no-audit --no-fund)
fi
# The identity tests' OpenID provider side (tests/identity/package-lock.json): jose mints and
# publishes the keys of a JWKS issuer; @sigstore/verify checks attestations as sigstore-js does;
# oidc-provider is the OpenID provider the SSO test signs in at, with playwright-core driving
# Chromium.
if [[ ! -d "$root/tests/identity/node_modules/jose" ||
    ! -d "$root/tests/identity/node_modules/@sigstore/verify" ||
    ! -d "$root/tests/identity/node_modules/oidc-provider" ||
    ! -d "$root/tests/identity/node_modules/playwright-core" ]]; then
    echo "install-deps: npm ci in tests/identity"
    (cd "$root/tests/identity" && npm ci --no-audit --no-fund)
fi
# The S3 server of the blob backend tests (tests/s3/package-lock.json): @20minutes/s3rver, an
# s3rver fork that verifies SigV4 (s3rver 3.7.1 accepts any V4 signature).
if [[ ! -d "$root/tests/s3/node_modules/@20minutes/s3rver" ]]; then
    echo "install-deps: npm ci in tests/s3"
    (cd "$root/tests/s3" && npm ci --no-audit --no-fund)
fi
