#!/usr/bin/env bash
# Configures and builds modelgate.
#   scripts/build.sh [normal]   -> build/       (RelWithDebInfo)
#   scripts/build.sh sanitize   -> build-asan/  (Debug, ASan + UBSan)
# Separate build trees so switching between the two never forces a full rebuild.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

mode=${1:-normal}
case "$mode" in
normal)
    dir=build
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
    ;;
sanitize)
    dir=build-asan
    # Debug keeps frames and variables intact so sanitizer reports point at the right line.
    flags=(-DMODELGATE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
    ;;
*)
    echo "usage: $0 [normal|sanitize]" >&2
    exit 2
    ;;
esac

jobs=$(nproc)
cmake -S . -B "$dir" "${flags[@]}"
cmake --build "$dir" -j "$jobs"
echo "build.sh: $mode build ready in $root/$dir"
