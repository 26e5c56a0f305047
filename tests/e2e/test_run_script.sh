#!/usr/bin/env bash
# Quick start's "run the server" (scripts/run.sh) installs only what the server needs: no
# browser, no Node, no gateways, no test framework. The package list is read from the
# script itself (MG_RUN_DRY=1), then checked both ways: nothing test-only is in it, and every
# library the server's CMake asks pkg-config for comes from a package that is in it. Last,
# the server-only configure must not look for cmocka.
. "$(dirname "$0")/lib.sh"

root=${MG_SOURCE_DIR:?MG_SOURCE_DIR must point at the source tree (ctest sets it)}
# Should the dry run ever fall through to starting the server, it must not take the fixed
# port 8470 another installation may be using (M29): the later --listen wins, and the
# timeout ends it.
out=$(MG_RUN_DRY=1 timeout 120 "$root/scripts/run.sh" --listen 127.0.0.1:0)
pkgs=$(printf '%s\n' "$out" | sed -n '/^packages:$/,/^build:/p' | sed '1d;$d')

has_pkg() { printf '%s\n' "$pkgs" | grep -qx "$1"; }

check "the dry run lists packages" test -n "$pkgs"
check "the dry run builds the server-only tree" grep -q '^build: scripts/build.sh server$' <<<"$out"
for p in chromium nodejs npm nginx-light nginx haproxy libcmocka-dev clang clang-format jq \
    zstd xz-utils zip sqlite3 wrk libclang-rt-14-dev; do
    refute "run.sh does not install $p" has_pkg "$p"
done
for p in build-essential cmake pkg-config; do
    check "run.sh installs $p" has_pkg "$p"
done

# Every pkg-config module of the top-level CMakeLists.txt (what modelgated and the CLI link)
# must come from a listed package; dpkg says which package owns each .pc file.
mods=$(grep -o 'pkg_check_modules([A-Z_]* REQUIRED IMPORTED_TARGET [a-z0-9_.+-]*' \
    "$root/CMakeLists.txt" | awk '{print $4}')
check "CMakeLists.txt names pkg-config modules" test -n "$mods"
for m in $mods; do
    pc="$(pkg-config --variable=pcfiledir "$m")/$m.pc"
    owner=$(dpkg -S "$(readlink -f "$pc")" 2>/dev/null | head -1 | cut -d: -f1 || true)
    if [ -z "$owner" ]; then
        owner=$(dpkg -S "$pc" 2>/dev/null | head -1 | cut -d: -f1 || true)
    fi
    check "pkg-config module $m ($owner) is installed by run.sh" has_pkg "$owner"
done

# The server-only configure does not need the test framework.
cfg="$MG_TMP/server-build"
check "the server-only tree configures" \
    cmake -S "$root" -B "$cfg" -DMODELGATE_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$MG_TMP/configure.log" 2>&1
refute "the server-only configure never looks for cmocka" grep -qi cmocka "$cfg/CMakeCache.txt"
refute "the server-only configure turns no -Werror on" \
    grep -q '^MODELGATE_WERROR:BOOL=ON' "$cfg/CMakeCache.txt"

mg_summary
