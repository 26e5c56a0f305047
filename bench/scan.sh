#!/usr/bin/env bash
# bench/scan.sh - the artifact safety scan's cost on a PyTorch checkpoint (issue M20): a
# torch.save state dict of --size-mib (default 1024) written by Debian's python3-torch, then
# bench/scan_run.c scans it (art_scan_file: the zip's central directory and data.pkl read,
# tensor storages skipped) and hashes it with SHA-256 in the same process, the file in the
# page cache, best of --rounds. Target: the scan at >= 1 GB/s of artifact; the ratio to
# SHA-256 (which every upload computes anyway) says what it adds to an upload.
#
# Usage: bench/scan.sh [--size-mib N] [--rounds N] [--tmp-dir DIR]
# Needs: a build (scripts/build.sh), /usr/bin/python3 with python3-torch, gcc.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

size_mib=1024
rounds=3
tmp_parent=${TMPDIR:-/tmp}/mg-bench
build_dir=${BUILD_DIR:-$root/build}
cc=${CC:-gcc}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --size-mib) size_mib=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tmp-dir) tmp_parent=$2; shift 2 ;;
    *) echo "usage: $0 [--size-mib N] [--rounds N] [--tmp-dir DIR]" >&2; exit 2 ;;
    esac
done

bench_init scan "$tmp_parent"
bench_require "$cc" pkg-config
[[ -f "$build_dir/libmg_artifact.a" ]] || bench_die "no $build_dir/libmg_artifact.a: run scripts/build.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || bench_die "python3-torch is missing (apt-get install python3-torch)"

# shellcheck disable=SC2046 # pkg-config output is a list of flags
"$cc" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I "$root" "$root/bench/scan_run.c" \
    -o "$work/scan_run" "$build_dir/libmg_artifact.a" "$build_dir/libmg_common.a" \
    $(pkg-config --libs jansson libarchive libcrypto libprotobuf-c) -lpthread -lm ||
    bench_die "cannot compile bench/scan_run.c"

# 64 MiB float32 tensors (and one for the rest): a large model's layout, written by torch.save.
/usr/bin/python3 - "$work/model.pt" "$size_mib" <<'PY' || bench_die "torch.save failed"
import collections, sys, torch
path, mib = sys.argv[1], int(sys.argv[2])
sd = collections.OrderedDict()
left = mib << 20
i = 0
while left > 0:
    n = min(left, 64 << 20)
    sd['layers.%d.weight' % i] = torch.zeros(n // 4, dtype=torch.float32)
    left -= n
    i += 1
torch.save(sd, path)
PY

echo "scan: $(du -h "$work/model.pt" | cut -f1) checkpoint, best of $rounds"
"$work/scan_run" "$work/model.pt" "$rounds" | tee "$work/result"
rate=$(sed -n 's/.*scan_MBps=\([0-9]*\).*/\1/p' "$work/result")
if [[ -n "$rate" && "$rate" -ge 1000 ]]; then
    echo "scan: PASS (>= 1000 MB/s)"
else
    echo "scan: FAIL (< 1000 MB/s)"
    exit 1
fi
