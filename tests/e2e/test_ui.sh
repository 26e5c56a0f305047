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

if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: node is not installed (scripts/install-deps.sh installs nodejs and npm)"
    exit 0
fi
if [[ ! -x "$MG_CHROMIUM" ]]; then
    echo "SKIP: $MG_CHROMIUM is not installed (scripts/install-deps.sh installs chromium)"
    exit 0
fi

cd "$ui"
if [[ ! -d node_modules/playwright-core ]]; then
    echo "test_ui: installing playwright-core from package-lock.json (npm ci)"
    npm ci --silent --no-audit --no-fund
fi

# node's own test runner finds review.test.mjs (and any later *.test.mjs) here.
exec node --test
