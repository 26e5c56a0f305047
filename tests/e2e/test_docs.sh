#!/usr/bin/env bash
# Every shell example in README.md and docs/*.md runs, as written, against a real
# modelgated: the docs cannot drift from the server again.
#
# The ```sh, ```bash and ```console blocks (console: the "$ " lines) of each file run in
# order in one bash session, so a block may use what an earlier one made ($MG, $auth, a
# version), as a reader following the page would. The session runs with `set -euo
# pipefail`; `curl` fails on an HTTP error (--fail-with-body), so a call the server refuses
# fails the block. The first failing block fails the test, naming its file and line.
#
# The server is this test's own: modelgated on a free loopback port, its data directory
# reachable as ./var from where the blocks run (what scripts/run.sh gives), and the
# README's address 127.0.0.1:8470 replaced by the real one. The built `modelgate` and
# `modelgated` come first on PATH.
#
# A block that cannot run here (it installs packages, starts another long-running server,
# or needs a machine the test does not have) is marked, on the line right before its
# fence, with <!-- doctest: skip (why) -->; a marker without a reason fails the test.
. "$(dirname "$0")/lib.sh"

SRC=${MG_SOURCE_DIR:?}
BUILD=${MG_BUILD_DIR:?}
W="$MG_TMP/docs"
mkdir -p "$W"

# ---- extract -------------------------------------------------------------------------------
# One script per Markdown file: each block preceded by a line saying where it comes from.
extract() {
    python3 - "$@" <<'EOF'
import re, sys
out_dir, files = sys.argv[1], sys.argv[2:]
total = 0
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i, skipped = [], 0, 0
    while i < len(lines):
        m = re.match(r"^```(sh|bash|console)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i + 1, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            sys.exit(f"{path}:{start}: a ```{lang} block is never closed")
        body = lines[i + 1:j]
        k = i - 1
        while k >= 0 and lines[k].strip() == "":
            k -= 1
        marker = lines[k].strip() if k >= 0 else ""
        if marker.startswith("<!-- doctest:"):
            if not re.match(r"^<!-- doctest: skip \(\S.*\) -->$", marker):
                sys.exit(f"{path}:{k + 1}: a doctest marker reads <!-- doctest: skip (why) -->")
            skipped += 1
            print(f"skip {path}:{start}: {marker[len('<!-- doctest: skip ('):-len(') -->')]}")
        else:
            if lang == "console":
                cmds, cont = [], False
                for line in body:
                    if line.startswith("$ ") or cont:
                        cmds.append(line[2:] if line.startswith("$ ") and not cont else line)
                        cont = line.endswith("\\")
                body = cmds
            blocks.append((start, body))
        i = j + 1
    name = re.sub(r"[^A-Za-z0-9]+", "_", path.split("/")[-1])
    with open(f"{out_dir}/{name}.sh", "w") as f:
        for start, body in blocks:
            f.write(f"doc_block {path.split('/')[-1]} {start}\n")
            f.write("\n".join(body) + "\n")
    total += len(blocks)
    print(f"{path}: {len(blocks)} block(s) to run, {skipped} skipped")
print(f"total {total}")
EOF
}

mg_start
PORT=${MG_URL##*:}
ln -s "$MG_DATA" "$W/var"
extract "$W" "$SRC/README.md" "$SRC"/docs/*.md | tee "$W/extract.log"
check "the docs hold shell examples to run" test "$(awk '/^total/{print $2}' "$W/extract.log")" -gt 5

# run_doc FILE.sh: the blocks in one bash session of their own (so that `set -e` holds
# whoever calls), from $W; fails naming the block that broke.
run_doc() {
    local script=$1
    {
        cat <<'EOF'
set -eEuo pipefail
doc_block() { DOC_AT="$1:$2"; echo "--- $1:$2"; }
curl() { command curl --fail-with-body "$@"; }
trap 'echo "doctest: the block at $DOC_AT failed (exit $?) at: $BASH_COMMAND" >&2' ERR
EOF
        sed "s/127\.0\.0\.1:8470/127.0.0.1:$PORT/g" "$script"
    } >"$script.run"
    (
        cd "$W" || exit 1
        mkdir -p "$W/home"
        env -u MODELGATE_URL -u MODELGATE_TOKEN PATH="$BUILD:$PATH" HOME="$W/home" \
            bash "$script.run"
    ) >"$script.out" 2>&1
}

# What the examples printed stays in $MG_BUILD_DIR/doc-artifacts/ for a look afterwards.
mkdir -p "$BUILD/doc-artifacts"
for script in "$W"/*_md.sh; do
    name=${script##*/}
    if run_doc "$script"; then
        ok "every example of ${name%.sh} runs"
    else
        not_ok "every example of ${name%.sh} runs"
        tail -n 40 "$script.out" >&2
    fi
    cp "$script.out" "$BUILD/doc-artifacts/${name%.sh}.out"
done

# The test itself: a broken example fails it (a block the server refuses).
printf 'doc_block broken.md 1\ncurl -sS -H "Authorization: Bearer nope" %s/api/v1/models\n' \
    "http://127.0.0.1:8470" >"$W/broken.sh"
refute "a block the server refuses fails the run" run_doc "$W/broken.sh"
check "... naming the block" grep -q "the block at broken.md:1 failed" "$W/broken.sh.out"
printf '<!-- doctest: skip -->\n```sh\ntrue\n```\n' >"$W/nomotive.md"
refute "a skip marker without a reason is refused" extract "$W/unused" "$W/nomotive.md"

mg_summary
