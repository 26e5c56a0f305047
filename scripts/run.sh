#!/usr/bin/env bash
# The README's run command: installs dependencies, builds, and starts modelgated in the
# foreground on 127.0.0.1:8470 with its data under ./var. Extra arguments go to modelgated.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

scripts/install-deps.sh
scripts/build.sh normal

# exec so signals (Ctrl-C, systemd stop) reach the server directly, not this shell.
exec build/modelgated --data-dir ./var --listen 127.0.0.1:8470 "$@"
