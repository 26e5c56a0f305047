#!/usr/bin/env bash
# The house in layers (M23's acceptance), checked on the repository's own C sources by
# layers.py beside this file: no include circle between units, each folder includes only
# the folders its line of the layer map allows, <microhttpd.h> only in http/, no .c or .h
# over 1,000 lines, and comments cite files that exist. Every violation is printed as
# FILE:LINE with one sentence on how to fix it. The checker's own self-test (one planted
# violation of each kind, and a clean tree full of false friends) runs first.
# Needs python3 and git only; no build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../skip.sh"

command -v python3 >/dev/null || mg_skip "python3 is not installed"
command -v git >/dev/null || mg_skip "git is not installed"
root=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) ||
    mg_skip "the sources are not a git checkout, so there is no list of the repository's files"

python3 "$here/layers.py" --self-test
python3 "$here/layers.py" "$root"
