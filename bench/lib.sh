# bench/lib.sh - what every benchmark script does the same way: checking its tools, a
# throw-away work directory, stopping the servers it started on any exit, dying with the
# servers' last log lines, and waiting for a server to be ready. Sourced, not run.
#
#   bench_init NAME TMP_PARENT    work=$(mktemp -d TMP_PARENT/NAME.XXXXXX), cleanup on exit
#   bench_stop_on_exit VAR...     variables (plain or arrays) holding pids to stop on exit
#   bench_require TOOL...         exit 1 naming a missing tool
#   bench_die MESSAGE             print the message and the last lines of $work's logs, exit 1
#   bench_wait_for WHAT PID CMD...  poll CMD until it succeeds, PID dies or ready_timeout_s
#
# Messages start with "$bench_name: ".

bench_name=bench
bench_tmp_parent=""
bench_pid_vars=()
work=""
ready_timeout_s=${ready_timeout_s:-30}

# Stop what the script started, by pid, and wait, so ports and files are really released
# before the work directory goes away. Runs on every exit, Ctrl-C and failures included.
bench_cleanup() {
    local var pid
    for var in "${bench_pid_vars[@]}"; do
        local -n pids=$var
        for pid in "${pids[@]}"; do
            if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
            fi
        done
        unset -n pids
    done
    if [[ -n "$work" && -d "$work" ]]; then
        rm -rf -- "$work"
    fi
    # Leave the parent only if something else lives there.
    [[ -z "$bench_tmp_parent" ]] || rmdir -- "$bench_tmp_parent" 2>/dev/null || true
}

bench_init() {
    bench_name=$1
    bench_tmp_parent=$2
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mkdir -p -- "$bench_tmp_parent"
    work=$(mktemp -d "$bench_tmp_parent/$bench_name.XXXXXX")
}

bench_stop_on_exit() {
    bench_pid_vars+=("$@")
}

bench_require() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 ||
            { echo "$bench_name: $tool not found (run scripts/install-deps.sh --bench)" >&2; exit 1; }
    done
}

bench_die() {
    local log
    echo "$bench_name: $*" >&2
    for log in "$work"/*.log "$work"/*/error.log; do
        if [[ -s "$log" ]]; then
            echo "---- last lines of $log ----" >&2
            tail -n 20 "$log" >&2
        fi
    done
    exit 1
}

bench_wait_for() {
    local what=$1 pid=$2 deadline=$((SECONDS + ready_timeout_s))
    shift 2
    while ! "$@"; do
        kill -0 "$pid" 2>/dev/null || { echo "$bench_name: $what exited before it was ready" >&2; return 1; }
        [[ $SECONDS -lt $deadline ]] || { echo "$bench_name: $what not ready after ${ready_timeout_s}s" >&2; return 1; }
        sleep 0.05
    done
}

# bench_cpu_ticks PID...: user + system clock ticks of these processes (all their threads),
# summed; a process that is gone counts 0, and with none there it prints nothing. The fields
# after the command name, which may hold spaces: utime and stime are the 12th and 13th.
bench_cpu_ticks() {
    local pid t="" f
    for pid in "$@"; do
        [[ -n $pid ]] || continue
        f=$(cut -d')' -f2- "/proc/$pid/stat" 2>/dev/null) || continue
        t=$((${t:-0} + $(awk '{ print $12 + $13 }' <<<"$f")))
    done
    echo "$t"
}

# bench_ticks_snapshot PID...: "pid:ticks ..." of these processes, so that with
# bench_ticks_delta a process that started between two snapshots counts from zero (a
# PostgreSQL backend forked during a run).
bench_ticks_snapshot() {
    local pid
    for pid in "$@"; do printf '%s:%s ' "$pid" "$(bench_cpu_ticks "$pid")"; done
}

# bench_ticks_delta BEFORE AFTER: the ticks used between two bench_ticks_snapshot answers.
bench_ticks_delta() {
    awk -v b="$1" -v a="$2" 'BEGIN {
        n = split(b, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, ":"); was[kv[1]] = kv[2] }
        n = split(a, y, " "); for (i = 1; i <= n; i++) { split(y[i], kv, ":"); d += kv[2] - was[kv[1]] }
        print d + 0 }'
}
