#!/usr/bin/env bash
# The Python client (clients/python, M28) against a real modelgated, run by Debian's
# /usr/bin/python3: installed offline with pip, then clients/python/tests/test_e2e.py pushes
# a directory and reads it back, compares its digest with the CLI's push of the same tree,
# appends metrics, follows a promotion to the LKG, pulls with every file's digest checked
# (a tampered artifact and a tampered local file raise), pushes a 1 GiB file in constant
# memory, and sees 400/403/409 as exceptions carrying the API's code.
. "$(dirname "$0")/lib.sh"

PY=${MG_TEST_PYTHON:-/usr/bin/python3} # Debian's; another only for a manual run
SRC=${MG_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CLI=${MODELGATE_CLI:-${MG_BUILD_DIR:?}/modelgate}
unset MODELGATE_URL MODELGATE_TOKEN MODELGATE_OIDC_TOKEN
export XDG_CONFIG_HOME="$MG_TMP/config"
W="$MG_TMP/work"
mkdir -p "$W"

# Install from a copy: pip builds in place and must not litter the source tree.
cp -r "$SRC/clients/python" "$MG_TMP/src"
rm -rf "$MG_TMP/src/build" "$MG_TMP/src"/*.egg-info
if ! "$PY" -m pip install --quiet --no-index --no-build-isolation --no-deps --no-cache-dir \
    --disable-pip-version-check --target "$MG_TMP/site" "$MG_TMP/src" >"$MG_TMP/pip.log" 2>&1; then
    cat "$MG_TMP/pip.log" >&2
    echo "not ok - pip install ./clients/python (offline, Debian's python3)"
    exit 1
fi
echo "ok - pip install ./clients/python (offline, Debian's python3)"

mg_start
token() {
    mg_api POST /api/v1/tokens "{\"name\":\"$1\",\"roles\":$2}" | jq -r .token
}
PUB=$(token pub '["publisher","reader"]')
DEP=$(token dep '["deployer","reader"]')
REV=$(token rev '["reviewer","reader"]')
RD=$(token rd '["reader"]')

cd "$W"
MG_URL="$MG_URL" MG_DATA="$MG_DATA" MG_WORK="$W" MODELGATE_CLI="$CLI" \
    ADMIN_TOKEN="$MG_TOKEN" PUB_TOKEN="$PUB" DEP_TOKEN="$DEP" REV_TOKEN="$REV" RD_TOKEN="$RD" \
    MG_EXPECT_SITE="$MG_TMP/site" PYTHONPATH="$MG_TMP/site" PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -s "$SRC/clients/python/tests/test_e2e.py"
