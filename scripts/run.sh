#!/usr/bin/env bash
# The README's run command: installs only what the server needs (no test tools, no browser,
# no gateways), builds modelgated and the CLI without the test suite, and starts modelgated
# in the foreground on 127.0.0.1:8470 with its data under ./var. Extra arguments go to
# modelgated.
#
# MG_RUN_DRY=1 prints the packages it would check and the build it would run, and stops
# (tests/e2e/test_run_script.sh asserts from it that no test-only package is installed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [[ ${MG_RUN_DRY:-0} == 1 ]]; then
    echo "packages:"
    scripts/install-deps.sh --server --list
    echo "build: scripts/build.sh server"
    exit 0
fi

scripts/install-deps.sh --server
scripts/build.sh server

# exec so signals (Ctrl-C, systemd stop) reach the server directly, not this shell.
exec build-server/modelgated --data-dir ./var --listen 127.0.0.1:8470 "$@"
