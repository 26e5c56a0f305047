#!/usr/bin/env bash
# Builds the libFuzzer targets tests/fuzz/fuzz_*.c into build-fuzz/.
#
# The project's libraries are built by the project's own CMake files with clang and
# -fsanitize=fuzzer-no-link,address,undefined, so the code under test carries coverage
# instrumentation and both sanitizers; each target is then linked with
# -fsanitize=fuzzer,address,undefined (libFuzzer supplies main()). Nothing is added to
# CMakeLists.txt: fuzzing needs clang, which the normal build does not.
#
# Usage: tests/fuzz/build.sh            (CC=clang-15 etc. picks another clang)
# Needs: clang with libFuzzer (Debian: clang, libclang-rt-14-dev; scripts/install-deps.sh
# --fuzz installs them).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out="$root/build-fuzz"
cc=${CC:-clang}

command -v "$cc" >/dev/null 2>&1 || { echo "fuzz/build: $cc not found (scripts/install-deps.sh --fuzz)" >&2; exit 1; }

# libFuzzer ships in compiler-rt; a clang without it fails only at link time, with a
# confusing message, so check first.
probe=$(mktemp -d)
trap 'rm -rf -- "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
    >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
    cat "$probe/err" >&2
    echo "fuzz/build: $cc cannot link libFuzzer (install libclang-rt-14-dev: scripts/install-deps.sh --fuzz)" >&2
    exit 1
fi

# -O1 -g: libFuzzer's recommendation (fast enough, exact stack traces).
# -fno-sanitize-recover=all: a UBSan report is a crash, so libFuzzer saves the input.
san_flags="-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
cmake -S "$root" -B "$out" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Debug \
    -DMODELGATE_TESTS=OFF -DCMAKE_C_FLAGS="$san_flags -fsanitize=fuzzer-no-link" >/dev/null
cmake --build "$out" -j "$(nproc)" --target mg_server

# daemon/'s mg_server and every layer below it, named (a build directory may hold a library
# that is no longer built), in one group: the linker resolves them in any order.
libs=(-Wl,--start-group)
for lib in server api http gateways runner control store identity artifact gates model os base; do
    libs+=("$out/libmg_$lib.a")
done
libs+=(-Wl,--end-group)
# shellcheck disable=SC2207 # pkg-config output is a list of flags
sys_libs=($(pkg-config --libs libmicrohttpd sqlite3 libpq jansson libarchive libcurl libcrypto \
    libprotobuf-c cjose libcmark))
warnings=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wformat-security -Wstrict-prototypes
    -Wmissing-prototypes -Wpointer-arith -Wvla -Wwrite-strings)

built=()
for src in "$root"/tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    # shellcheck disable=SC2086 # san_flags is a list of flags
    "$cc" $san_flags -fsanitize=fuzzer "${warnings[@]}" -I "$root" "$src" -o "$out/$name" \
        "${libs[@]}" "${sys_libs[@]}" -lpthread -lm -ldl
    built+=("$name")
done
echo "fuzz/build: ${built[*]} ready in $out"
