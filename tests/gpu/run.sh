#!/usr/bin/env bash
# tests/gpu/run.sh - the smoke-test runner on a real NVIDIA GPU (not part of
# ctest; see tests/gpu/README.md).
#
# Builds modelgated if needed, starts it with a smoke profile that runs a
# small CUDA workload, checks that NVML discovery (GET /api/v1/runner) agrees
# with nvidia-smi, registers a version with resources, runs a smoke test with
# gpu "required" and a promotion whose policy requires a GPU, and checks the
# recorded GPU name and UUID and peak_gpu_memory_mib > 0. Prints a summary;
# exits 0 when every check passed.
#
# The workload, best first:
#   torch   python3 with torch: a 4-layer MLP on cuda, 200 timed batches;
#   cuda    python3 without torch: ctypes on libcuda.so.1 (the driver API):
#           a context, a 512 MiB allocation, 200 timed memsets;
#   smi     no python3: nvidia-smi queries the GPU it was given (no memory is
#           used, so the peak check only warns).
#
# Environment:
#   MODELGATED         an existing modelgated binary (else one is built)
#   MG_GPU_BUILD_DIR   where to build (default <repo>/build-gpu)
#   MG_GPU_PYTHON      the python3 to run the workload with (default: python3
#                      on the runner's PATH /usr/local/bin:/usr/bin:/bin);
#                      give a virtualenv's python here to use its torch
#   MG_NVML_LIBRARY    --nvml-library (default libnvidia-ml.so.1)
#   MG_GPU_SELFTEST=1  dry run on a machine without a GPU, e.g. with
#                      MG_NVML_LIBRARY=<build>/tests/libfake_nvml.so and
#                      FAKE_NVML_GPUS=...: nvidia-smi is not consulted, the
#                      workload is skipped and the peak check only warns
#   MG_GPU_KEEP=1      keep the scratch directory (data, logs)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SELFTEST=${MG_GPU_SELFTEST:-0}
PASS=0
FAIL=0
WARN=0
SUMMARY=()

say() { printf '%s\n' "$*"; }
ok() { PASS=$((PASS + 1)); SUMMARY+=("PASS  $*"); say "ok: $*"; }
bad() { FAIL=$((FAIL + 1)); SUMMARY+=("FAIL  $*"); say "FAIL: $*" >&2; }
warn() { WARN=$((WARN + 1)); SUMMARY+=("WARN  $*"); say "warning: $*" >&2; }
die() { say "run.sh: $*" >&2; exit 2; }

for tool in curl python3; do
    command -v "$tool" >/dev/null || die "$tool is required (it drives the REST API)"
done
if [ "$SELFTEST" != 1 ]; then
    command -v nvidia-smi >/dev/null || die "nvidia-smi not found: is the NVIDIA driver installed?"
fi

# ---- build ---------------------------------------------------------------
if [ -n "${MODELGATED:-}" ]; then
    [ -x "$MODELGATED" ] || die "MODELGATED=$MODELGATED is not executable"
    BIN=$MODELGATED
else
    BUILD=${MG_GPU_BUILD_DIR:-$ROOT/build-gpu}
    BIN=$BUILD/modelgated
    if [ ! -x "$BIN" ]; then
        say "building modelgated in $BUILD"
        cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMODELGATE_TESTS=OFF \
            >"${TMPDIR:-/tmp}/mg-gpu-cmake.log" 2>&1 ||
            die "cmake configure failed; see ${TMPDIR:-/tmp}/mg-gpu-cmake.log"
        cmake --build "$BUILD" -j"$(nproc)" --target modelgated \
            >>"${TMPDIR:-/tmp}/mg-gpu-cmake.log" 2>&1 ||
            die "build failed; see ${TMPDIR:-/tmp}/mg-gpu-cmake.log"
    fi
fi

# ---- scratch space and the workload ---------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mg-gpu.XXXXXX")
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    if [ "${MG_GPU_KEEP:-0}" = 1 ]; then
        say "kept $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

PY=${MG_GPU_PYTHON:-}
if [ -z "$PY" ]; then
    for d in /usr/local/bin /usr/bin /bin; do
        if [ -x "$d/python3" ]; then PY=$d/python3; break; fi
    done
fi

# The workload: reads the model's config.json, writes the runner's output.
cat >"$WORK/workload.py" <<'PY'
import json, os, sys, time

model_dir, output, mode = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = json.load(open(os.path.join(model_dir, "config.json")))
cuda = os.environ.get("CUDA_VISIBLE_DEVICES", "")
checks = [{"name": "gpu-assigned", "passed": cuda.startswith(("GPU-", "MIG-")),
           "detail": "CUDA_VISIBLE_DEVICES=" + cuda}]
lat = []

def done(extra_checks):
    json.dump({"latencies_ms": lat, "checks": checks + extra_checks}, open(output, "w"))
    sys.exit(0)

if mode in ("auto", "torch"):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and not torch.cuda.is_available():
        if mode == "torch":
            done([{"name": "torch-cuda", "passed": False,
                   "detail": "torch %s sees no CUDA device" % torch.__version__}])
        torch = None  # a CPU-only torch: use the driver API below
    if torch is not None:
        dev = torch.device("cuda:0")
        torch.manual_seed(0)
        h, n, b = cfg["hidden"], cfg["layers"], cfg["batch"]
        layers = []
        for _ in range(n):
            layers += [torch.nn.Linear(h, h), torch.nn.ReLU()]
        net = torch.nn.Sequential(*layers).to(dev).eval()
        x = torch.randn(b, h, device=dev)
        with torch.inference_mode():
            for _ in range(10):
                net(x)
            torch.cuda.synchronize()
            start = time.monotonic()
            while len(lat) < cfg["iterations"] or time.monotonic() - start < cfg["min_seconds"]:
                t0 = time.perf_counter()
                y = net(x)
                torch.cuda.synchronize()
                lat.append((time.perf_counter() - t0) * 1000.0)
            finite = bool(torch.isfinite(y).all().item())
        name = torch.cuda.get_device_name(0)
        done([{"name": "mode", "passed": True, "detail": "torch " + torch.__version__},
              {"name": "mlp-output-finite", "passed": finite, "detail": "shape %s" % list(y.shape)},
              {"name": "device", "passed": True, "detail": name}])
    if mode == "torch":
        done([{"name": "torch", "passed": False, "detail": "torch is not importable"}])

# No torch: the CUDA driver API through ctypes.
import ctypes
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    done([{"name": "libcuda", "passed": False, "detail": str(e)}])

def call(fn, *args):
    r = getattr(cu, fn)(*args)
    if r != 0:
        s = ctypes.c_char_p()
        cu.cuGetErrorString(r, ctypes.byref(s))
        done([{"name": fn, "passed": False, "detail": "%d %s" % (r, (s.value or b"").decode())}])

dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
call("cuInit", 0)
call("cuDeviceGet", ctypes.byref(dev), 0)
buf = ctypes.create_string_buffer(100)
call("cuDeviceGetName", buf, 100, dev)
call("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev)
size = cfg["alloc_mib"] << 20
call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(size))
start = time.monotonic()
i = 0
while len(lat) < cfg["iterations"] or time.monotonic() - start < cfg["min_seconds"]:
    t0 = time.perf_counter()
    call("cuMemsetD8_v2", ptr, ctypes.c_ubyte(i & 0xff), ctypes.c_size_t(size))
    call("cuCtxSynchronize")
    lat.append((time.perf_counter() - t0) * 1000.0)
    i += 1
call("cuMemFree_v2", ptr)
call("cuCtxDestroy_v2", ctx)
done([{"name": "mode", "passed": True, "detail": "cuda driver API (no torch)"},
      {"name": "device", "passed": True, "detail": buf.value.decode()}])
PY

# The profile's command (no shell runs it: the runner execs /bin/sh with
# this file). The runner gives it a clean environment; HOME is set here for
# torch's caches.
{
    echo '#!/bin/sh'
    # shellcheck disable=SC2016 # expanded by the smoke command, not here
    echo 'export HOME="$PWD"'
    if [ "$SELFTEST" = 1 ]; then
        cat <<'SH'
echo "selftest: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
if [ -n "$CUDA_VISIBLE_DEVICES" ]; then ok=true; else ok=false; fi
printf '{"latencies_ms":[1,2,3],"checks":[{"name":"mode","passed":true,"detail":"selftest, no workload"},{"name":"gpu-assigned","passed":%s,"detail":"CUDA_VISIBLE_DEVICES=%s"}]}' "$ok" "$CUDA_VISIBLE_DEVICES" > "$2"
SH
    elif [ -n "$PY" ]; then
        # shellcheck disable=SC2016 # $1 and $2 are the smoke command's arguments
        printf 'exec %q %q "$1" "$2" auto\n' "$PY" "$WORK/workload.py"
    else
        # nvidia-smi accepts a UUID for -i: it answers for the GPU we were given.
        cat <<'SH'
lat=""
i=0
while [ $i -lt 5 ]; do
  t0=$(date +%s%N)
  line=$(nvidia-smi --query-gpu=uuid,name --format=csv,noheader -i "$CUDA_VISIBLE_DEVICES") || exit 1
  t1=$(date +%s%N)
  lat="$lat${lat:+,}$(( (t1 - t0) / 1000000 ))"
  i=$((i + 1))
done
echo "nvidia-smi: $line"
case "$line" in "$CUDA_VISIBLE_DEVICES,"*) ok=true ;; *) ok=false ;; esac
printf '{"latencies_ms":[%s],"checks":[{"name":"mode","passed":true,"detail":"nvidia-smi only"},{"name":"gpu-assigned","passed":%s,"detail":"CUDA_VISIBLE_DEVICES=%s"},{"name":"gpu-visible","passed":%s,"detail":"%s"}]}' "$lat" "$ok" "$CUDA_VISIBLE_DEVICES" "$ok" "$line" > "$2"
SH
    fi
} >"$WORK/smoke.sh"

# The model: a config the workload reads (an archive, so it is extracted).
mkdir -p "$WORK/model"
cat >"$WORK/model/config.json" <<'JSON'
{"hidden": 2048, "layers": 4, "batch": 64, "iterations": 200, "min_seconds": 2.0, "alloc_mib": 512}
JSON
tar -C "$WORK/model" -cf "$WORK/model.tar" config.json

# ---- the server ------------------------------------------------------------
NVML_ARGS=()
[ -n "${MG_NVML_LIBRARY:-}" ] && NVML_ARGS=(--nvml-library "$MG_NVML_LIBRARY")
mkdir -p -m 700 "$WORK/data"
"$BIN" --listen 127.0.0.1:0 --data-dir "$WORK/data" --port-file "$WORK/port" \
    --smoke-profile "cuda=/bin/sh $WORK/smoke.sh {model_dir} {output}" \
    --smoke-timeout 300 --smoke-interval 0 "${NVML_ARGS[@]}" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
    [ -s "$WORK/port" ] && [ -s "$WORK/data/admin.token" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; die "modelgated exited"; }
    sleep 0.1
done
[ -s "$WORK/port" ] || die "modelgated did not start; see $WORK/server.log"
BASE="http://127.0.0.1:$(cat "$WORK/port")/api/v1"
TOKEN=$(cat "$WORK/data/admin.token")

api() { # METHOD PATH [JSON body]
    local args=(-sS -X "$1" -H "Authorization: Bearer $TOKEN" -w '\n%{http_code}')
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    curl "${args[@]}" "$BASE$2"
}
body() { sed '$d' <<<"$1"; }
code() { tail -n1 <<<"$1"; }
jget() { # JSON EXPR (python, the document is d)
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print("" if v is None else (json.dumps(v) if isinstance(v,(dict,list,bool)) else v))' "$1" "$2"
}
expect_code() { # RESPONSE CODE WHAT
    if [ "$(code "$1")" != "$2" ]; then
        say "$3: HTTP $(code "$1"): $(body "$1")" >&2
        die "$3 failed"
    fi
}

# ---- NVML discovery --------------------------------------------------------
R=$(api GET /runner)
expect_code "$R" 200 "GET /runner"
RUNNER=$(body "$R")
say "GET /api/v1/runner: $RUNNER"
NVML=$(jget "$RUNNER" 'd["nvml"]')
NGPUS=$(jget "$RUNNER" 'len(d["gpus"])')
if [ "$NVML" = available ] && [ "$NGPUS" -gt 0 ]; then
    ok "NVML available, $NGPUS GPU(s), driver $(jget "$RUNNER" 'd.get("driver")')"
else
    bad "NVML: $NVML $(jget "$RUNNER" 'd.get("nvml_error")'), $NGPUS GPU(s)"
    exit 1
fi
if [ "$SELFTEST" = 1 ]; then
    SMI=$(jget "$RUNNER" '"\n".join(g["uuid"] + ", " + g["name"] for g in d["gpus"])')
else
    SMI=$(nvidia-smi --query-gpu=uuid,name --format=csv,noheader)
fi
for i in $(seq 0 $((NGPUS - 1))); do
    U=$(jget "$RUNNER" "d['gpus'][$i]['uuid']")
    N=$(jget "$RUNNER" "d['gpus'][$i]['name']")
    T=$(jget "$RUNNER" "d['gpus'][$i]['memory_total_mib']")
    F=$(jget "$RUNNER" "d['gpus'][$i]['memory_free_mib']")
    if grep -qxF "$U, $N" <<<"$SMI"; then
        ok "GPU $i: $N $U, $F of $T MiB free (as nvidia-smi reports)"
    else
        bad "GPU $i: $N $U is not in nvidia-smi's list: $SMI"
    fi
    [ "$T" -gt 0 ] || bad "GPU $i: memory_total_mib is $T"
done

# ---- a version and its smoke test ------------------------------------------
R=$(curl -sS -X POST -H "Authorization: Bearer $TOKEN" --data-binary @"$WORK/model.tar" \
    -w '\n%{http_code}' "$BASE/blobs")
expect_code "$R" 201 "upload"
ART=$(jget "$(body "$R")" 'd["digest"]')
expect_code "$(api POST /models '{"name":"gpu-smoke"}')" 201 "create model"
R=$(api POST /models/gpu-smoke/versions \
    "{\"artifact\":\"$ART\",\"smoke\":{\"profile\":\"cuda\"},\"resources\":{\"parameters\":20000000,\"precision\":\"fp32\"}}")
expect_code "$R" 201 "create version"
say "estimated_vram_gib: $(jget "$(body "$R")" 'd.get("estimated_vram_gib")')"

wait_test() { # VERSION ID -> prints the SmokeTest
    local deadline=$((SECONDS + 330)) t st
    while [ $SECONDS -lt $deadline ]; do
        t=$(body "$(api GET "/models/gpu-smoke/versions/$1/smoke-tests")")
        st=$(jget "$t" "next((x['state'] for x in d['items'] if x['id'] == '$2'), '')")
        case "$st" in passed | failed | error)
            jget "$t" "next(x for x in d['items'] if x['id'] == '$2')"
            return 0 ;;
        esac
        sleep 0.5
    done
    die "smoke test $2 did not finish; see $WORK/server.log"
}

R=$(api POST /models/gpu-smoke/versions/1/smoke-tests '{"gpu":"required"}')
expect_code "$R" 202 "queue a smoke test"
ID=$(jget "$(body "$R")" 'd["id"]')
say "smoke test $ID queued (gpu required)"
T=$(wait_test 1 "$ID")
say "SmokeTest: $T"
STATE=$(jget "$T" 'd["state"]')
GNAME=$(jget "$T" '(d["gpu"] or {}).get("name")')
GUUID=$(jget "$T" '(d["gpu"] or {}).get("uuid")')
PEAK=$(jget "$T" 'd.get("peak_gpu_memory_mib")')
MODE=$(jget "$T" 'next((c.get("detail") for c in d["checks"] if c["name"] == "mode"), "?")')
if [ "$STATE" = passed ]; then
    ok "smoke test passed ($MODE): p50 $(jget "$T" '(d["latency_ms"] or {}).get("p50")') ms, p95 $(jget "$T" '(d["latency_ms"] or {}).get("p95")') ms over $(jget "$T" '(d["latency_ms"] or {}).get("samples")') samples"
else
    bad "smoke test $STATE: $(jget "$T" 'd["reason"]'); log: $(jget "$T" 'd["log_tail"]')"
fi
if [ -n "$GUUID" ] && grep -q "^$GUUID, " <<<"$SMI"; then
    ok "recorded GPU uuid $GUUID is one of nvidia-smi's"
else
    bad "recorded GPU uuid '$GUUID' is not in nvidia-smi's list: $SMI"
fi
if [ -n "$GUUID" ] && grep -qxF "$GUUID, $GNAME" <<<"$SMI"; then
    ok "recorded GPU name '$GNAME' matches nvidia-smi for that uuid"
else
    bad "recorded GPU name '$GNAME' does not match nvidia-smi for $GUUID"
fi
CVD=$(jget "$T" 'next((c.get("detail") for c in d["checks"] if c["name"] == "gpu-assigned"), "")')
if [ "$CVD" = "CUDA_VISIBLE_DEVICES=$GUUID" ]; then
    ok "the command saw CUDA_VISIBLE_DEVICES=$GUUID"
else
    bad "the command saw $CVD, the runner recorded $GUUID"
fi
if [ -n "$PEAK" ] && [ "$PEAK" -gt 0 ]; then
    ok "peak_gpu_memory_mib $PEAK"
elif [ "$SELFTEST" = 1 ] || [ -z "$PY" ]; then
    warn "peak_gpu_memory_mib '$PEAK' (the $MODE workload uses no GPU memory)"
else
    bad "peak_gpu_memory_mib '$PEAK', want > 0"
fi

# ---- a promotion whose policy requires a GPU -------------------------------
expect_code "$(api PUT /models/gpu-smoke/policies/production \
    '{"smoke":{"required":true,"gpu":"required"}}')" 200 "policy"
R=$(api POST /promotions '{"model":"gpu-smoke","version":1,"alias":"production","reason":"gpu run.sh"}')
expect_code "$R" 201 "promotion"
PID_=$(jget "$(body "$R")" 'd["id"]')
deadline=$((SECONDS + 330))
PST=
while [ $SECONDS -lt $deadline ]; do
    P=$(body "$(api GET "/promotions/$PID_")")
    PST=$(jget "$P" 'd["state"]')
    case "$PST" in succeeded | rejected | aborted | rolled_back) break ;; esac
    sleep 0.5
done
FIT=$(jget "$P" 'next((g["status"] + ": " + (g.get("detail") or "") for g in d["gates"] if g["kind"] == "fit"), "none")')
SMK=$(jget "$P" 'next((g["status"] + ": " + (g.get("detail") or "") for g in d["gates"] if g["kind"] == "smoke"), "none")')
if [ "$PST" = succeeded ]; then
    ok "promotion succeeded (fit gate $FIT; smoke gate $SMK)"
else
    bad "promotion $PST (fit gate $FIT; smoke gate $SMK)"
fi

# ---- summary ---------------------------------------------------------------
say ""
say "==== modelgate GPU smoke test: $PASS passed, $FAIL failed, $WARN warning(s) ===="
for line in "${SUMMARY[@]}"; do say "  $line"; done
say "  device: ${GNAME:-?} ${GUUID:-?}; workload: $MODE; binary: $BIN"
[ "$FAIL" -eq 0 ]
