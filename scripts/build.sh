#!/usr/bin/env bash
# Configures and builds modelgate.
#   scripts/build.sh [normal]   -> build/       (RelWithDebInfo, with the test suite)
#   scripts/build.sh server     -> build-server/ (RelWithDebInfo, modelgated and modelgate only;
#       no test framework needed, no -Werror: the user's build, used by scripts/run.sh)
#   scripts/build.sh sanitize   -> build-asan/  (Debug, ASan + UBSan)
#   scripts/build.sh release-gcc | release-clang -> build-release-{gcc,clang}/ (Release,
#       tests built too: what a packager builds; -O2/-O3 warnings such as maybe-uninitialized show here)
# Separate build trees so switching between them never forces a full rebuild. Every mode
# builds with -Werror (MODELGATE_WERROR=ON): that is for us and CI; a user's plain
# `cmake -S . -B build` leaves it off so a newer compiler cannot break their build.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

mode=${1:-normal}
case "$mode" in
normal)
    dir=build
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMODELGATE_TESTS=ON)
    ;;
server)
    dir=build-server
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMODELGATE_TESTS=OFF)
    ;;
sanitize)
    dir=build-asan
    # Debug keeps frames and variables intact so sanitizer reports point at the right line.
    flags=(-DMODELGATE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DMODELGATE_TESTS=ON)
    ;;
release-gcc | release-clang)
    cc=${mode#release-}
    dir=build-release-$cc
    flags=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DMODELGATE_TESTS=ON)
    ;;
*)
    echo "usage: $0 [normal|server|sanitize|release-gcc|release-clang]" >&2
    exit 2
    ;;
esac

jobs=$(nproc)
werror=ON
[[ $mode == server ]] && werror=OFF
cmake -S . -B "$dir" "${flags[@]}" -DMODELGATE_WERROR=$werror
cmake --build "$dir" -j "$jobs"
echo "build.sh: $mode build ready in $root/$dir"
