#!/usr/bin/env bash
# The reviewer UI end to end: tests/ui/review.test.mjs drives a real headless
# Chromium (Debian's `chromium`, through npm playwright-core) against a real
# modelgated that it starts itself. Screenshots land in $MG_BUILD_DIR/ui-artifacts/.
#
# Skips (exit 0) only when node or chromium is not installed at all;
# scripts/install-deps.sh installs both, so CI always runs it.
set -euo pipefail

: "${MODELGATED:?MODELGATED must point at the modelgated binary (ctest sets it)}"
here=${BASH_SOURCE[0]%/*}
[[ "$here" == "${BASH_SOURCE[0]}" ]] && here=.
ui=$(cd "$here/../ui" && pwd)
export MG_CHROMIUM=${MG_CHROMIUM:-/usr/bin/chromium}

# skip WHY: without node or chromium there is no browser to drive. A developer's ctest
# skips (exit 0); scripts/test.sh, which installed both, sets MG_REQUIRE_ALL=1 so that
# the UI suite can never vanish from CI unnoticed.
skip() {
    if [[ "${MG_REQUIRE_ALL:-0}" == 1 ]]; then
        echo "FAIL: $1, and MG_REQUIRE_ALL=1 forbids skipping the UI suite" >&2
        exit 1
    fi
    echo "SKIP: $1"
    exit 0
}
command -v node >/dev/null 2>&1 ||
    skip "node is not installed (scripts/install-deps.sh installs nodejs and npm)"
[[ -x "$MG_CHROMIUM" ]] ||
    skip "$MG_CHROMIUM is not installed (scripts/install-deps.sh installs chromium)"

cd "$ui"
if [[ ! -d node_modules/playwright-core || ! -d node_modules/axe-core ]]; then
    echo "test_ui: installing playwright-core and axe-core from package-lock.json (npm ci)"
    npm ci --silent --no-audit --no-fund
fi

# node's own test runner finds review.test.mjs (and any later *.test.mjs) here.
exec node --test
