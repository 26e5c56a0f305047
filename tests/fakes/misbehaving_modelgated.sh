#!/bin/bash
# misbehaving_modelgated.sh - a stand-in for modelgated that runs the real daemon
# ($MG_WRAP_REAL) and, on SIGTERM, stops it and then misbehaves as $MG_WRAP_MODE says. The
# harness self-tests (tests/integration/test_harness.c, tests/e2e/test_lib_checks.sh) show
# that each misbehaviour fails the test program that started it (M29):
#   plain  exit with the daemon's status (a well-behaved daemon)
#   exit1  exit 1 after SIGTERM            hang   never exit (until SIGKILL)
#   leak   a LeakSanitizer report in the log, then the daemon's status
#   token  the admin token in the log      error  an internal "error:" line in the log
data=''
prev=''
for a in "$@"; do
    [ "$prev" = --data-dir ] && data=$a
    prev=$a
done
"$MG_WRAP_REAL" "$@" &
child=$!
on_term() {
    kill -TERM "$child"
    wait "$child"
    st=$?
    case $MG_WRAP_MODE in
    exit1) exit 1 ;;
    hang) exec sleep 600 ;;
    leak)
        echo '==4242==ERROR: LeakSanitizer: detected memory leaks' >&2
        exit "$st"
        ;;
    token)
        cat "$data/admin.token" >&2
        exit "$st"
        ;;
    error)
        echo 'error: GET /api/v1/models: an internal error' >&2
        exit "$st"
        ;;
    *) exit "$st" ;;
    esac
}
trap on_term TERM
wait "$child"
