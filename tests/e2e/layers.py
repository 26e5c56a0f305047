#!/usr/bin/env python3
"""layers.py - M23's acceptance as a check: the house stays in layers.

Reads the repository's own C sources (git ls-files '*.c' '*.h', without tests/ and bench/)
and prints every violation as FILE:LINE: KIND: what is wrong. Fix: one sentence.

  circle     an include circle between units (a unit is x.c + x.h; a private x_int.h
             belongs to unit x): the circle's members and the includes that close it
  layer      a folder includes a folder outside its line of LAYERS below
  mhd        <microhttpd.h> included outside http/ (daemon/ included)
  size       a .c or .h file over MAX_LINES lines
  cite       a comment cites a file that is not in the repository

Exit 0 when the house is clean, 1 when anything was found, 2 on a usage error.
`layers.py --self-test` plants one of each in a temporary repository and checks that each
is found, and that a clean tree with the usual false friends (URLs, <sys/file.h>, man
pages, run-time file names) passes. Needs only python3 and git.
"""

import fnmatch
import os
import re
import subprocess
import sys
import tempfile

# ---- the target: which folders each folder's files may include (M23, docs/design.md) ----------
# A folder is a path's first component. Everything else is a layer violation; a folder that
# is not listed here is one too (add its line here when a new layer is born).
_MAP = {  # folder: the folders its files may include ("*": all of them)
    "base": "",  # errors, capped buffers, time, encodings, JSON text
    "os": "base",  # files 0600/0700, child processes, counters, the wait primitive
    "model": "base",  # shared enums and typed records (version, alias, promotion)
    "gates": "base model",  # pure decisions: no I/O, no store
    "artifact": "base os",  # archives, weight headers, the safety scan, signing bundles
    "identity": "base os model",  # OIDC discovery, JWKS, JWT checks
    "store": "base os model artifact",  # persistence: databases, blobs, cluster
    "control": "base os model gates store identity artifact",  # release control, no HTTP
    "gateways": "base os model gates store control",  # outbox workers: register with control
    "runner": "base os model gates store artifact control",  # smoke tests, NVML: register too
    "http": "base os model gates store identity",  # libmicrohttpd glue; names no worker
    "api": "base os model gates store identity artifact http control",  # one file per resource
    "daemon": "*",  # main, the option table, wiring
    "client": "base os artifact",  # the CLI: REST only
}
LAYERS = {k: None if v == "*" else tuple(v.split()) for k, v in _MAP.items()}

# Top-level folders that are not checked (their own rules live with them).
NOT_CHECKED = ("tests", "bench")
# Generated code, never in git today; listed so that it stays out if it ever is.
GENERATED = ("*.pb-c.c", "*.pb-c.h", "gen/*")
# The one library only http/ may include.
HTTP_ONLY_HEADERS = ("microhttpd.h",)
HTTP_FOLDER = "http"
MAX_LINES = 1000

# ---- comments that cite files --------------------------------------------------------------
CITE_EXTS = ("c", "h", "md", "sh", "sql", "json", "py", "mjs", "yaml", "conf", "cmake")
# Shared design documents that live outside the repository: a comment must cite what is in it.
OUTSIDE = {
    "API.md": "docs/api.md",  # the REST contract; the repository's copy is docs/api.md
    "DESIGN.md": "docs/design.md",  # the design; the repository's map is docs/design.md
    "STYLE.md": None,  # the style guide; not in the repository: say the rule instead
}
# Names of files the program reads or writes at run time, not files of this repository.
RUNTIME_NAMES = {
    "config.json",  # the CLI's ~/.config/modelgate/config.json; a Keras v3 archive's config.json
    "index.json",  # an OCI image layout's index (oci-layout directories)
}
# Folders of the data directory, made at run time: blobs/sha256/..., keys/..., tmp/...
RUNTIME_DIRS = ("blobs/", "keys/", "tmp/")
# Files of other projects, cited by name next to the project's name.
EXTERNAL = {
    "Lib/pickle.py",  # CPython's pickle module: the reference for every opcode
    "pickletools.py",  # CPython's pickletools
    "torch/_weights_only_unpickler.py",  # PyTorch's weights_only loader
    "docs/spec.md",  # the CNCF ModelPack specification's documents
    "docs/config.md",  # ModelPack
    "docs/annotations.md",  # ModelPack
    "catalog/pg_type_d.h",  # PostgreSQL's server header with the type OIDs
}

FIX = {
    "circle": "break the circle: move what both sides need into a lower unit, or hand the "
    "lower unit a function pointer instead of letting it name the upper one.",
    "layer": "move what is needed down into an allowed folder, or have the lower folder call "
    "back through a function pointer; widen LAYERS in tests/e2e/layers.py only if the design "
    "map in docs/design.md changes too.",
    "mhd": "keep libmicrohttpd behind http/: include it only from http/'s .c files and private "
    "x_int.h headers, and give the other folders http/'s own types and functions.",
    "size": "split it by meaning into two units (a private x_int.h can carry what they share).",
    "cite": "cite a file that exists, by its path from the repository root, or say what it "
    "holds instead of naming a file.",
}
KINDS = ("circle", "layer", "mhd", "size", "cite")

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
# A token: a run of characters a path can hold, ending in a known extension.
TOKEN_RE = re.compile(r"[\w.$~*?<>{}/+@-]+\.(?:%s)(?![\w])" % "|".join(CITE_EXTS))
URL_RE = re.compile(r"[A-Za-z][\w+.-]*://\S*")
MAN_RE = re.compile(r"\(\d\w*\)")


def git_files(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z"], check=True, stdout=subprocess.PIPE
    ).stdout.decode()
    return [f for f in out.split("\0") if f]


def checked(path):
    if path.split("/")[0] in NOT_CHECKED:
        return False
    return not any(fnmatch.fnmatch(path, g) or fnmatch.fnmatch(os.path.basename(path), g)
                   for g in GENERATED)


LEX_RE = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?", re.S)


def lex(text):
    """Split C text into code (comments and literals blanked, newlines kept) and comments
    as (line, text) pairs, one per comment line."""
    code, comments, pos, line = [], [], 0, 1
    for m in LEX_RE.finditer(text):
        tok = m.group(0)
        if tok[0] in "\"'" and _in_include(text, m.start()):
            continue  # #include "x.h" stays as it is
        line += text.count("\n", pos, m.start())
        code.append(text[pos:m.start()])
        code.append(re.sub(r"[^\n]", " ", tok))  # a line continuation keeps its \n
        if tok.startswith("//"):
            comments.append((line, tok[2:]))
        elif tok.startswith("/*"):
            body = tok[2:-2] if tok.endswith("*/") and len(tok) >= 4 else tok[2:]
            comments.extend((line + k, part) for k, part in enumerate(body.split("\n")))
        line += tok.count("\n")
        pos = m.end()
    code.append(text[pos:])
    return "".join(code), comments


def _in_include(text, i):
    start = text.rfind("\n", 0, i) + 1
    return re.match(r"[ \t]*#[ \t]*include\b", text[start:i]) is not None


class Repo:
    def __init__(self, root):
        self.root = root
        self.all = git_files(root)
        self.all_set = set(self.all)
        self.by_base = {}
        for f in self.all:
            self.by_base.setdefault(os.path.basename(f), []).append(f)
        self.sources = [f for f in self.all
                        if f.endswith((".c", ".h")) and checked(f)
                        and os.path.isfile(os.path.join(root, f))]
        self.text, self.code, self.comments, self.includes = {}, {}, {}, {}
        self.system_headers = set()
        for f in self.sources:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                t = fh.read()
            self.text[f] = t
            code, comments = lex(t)
            self.code[f], self.comments[f] = code, comments
            incs = []
            for m in INCLUDE_RE.finditer(code):
                ln = code.count("\n", 0, m.start()) + 1
                delim, name = m.group(1), m.group(2).strip()
                target = self.resolve(f, delim, name)
                incs.append((ln, delim, name, target))
                if target is None:  # <sys/file.h>, generated <onnx.pb-c.h>: named freely
                    self.system_headers.add(name)
            self.includes[f] = incs

    def resolve(self, f, delim, name):
        """The repository file an #include names, or None (system or generated)."""
        cands = [os.path.normpath(os.path.join(os.path.dirname(f), name))] if delim == '"' else []
        cands.append(os.path.normpath(name))
        for c in cands:
            if c in self.all_set:
                return c
        return None


def unit_of(path):
    d, b = os.path.split(path)
    stem = os.path.splitext(b)[0]
    if stem.endswith("_int"):
        stem = stem[:-4]
    return os.path.join(d, stem)


def folder_of(path):
    return path.split("/")[0] if "/" in path else "."


# ---- the checks ------------------------------------------------------------------------------
def check_circles(repo, out):
    edges = {}  # unit -> {unit: [(file, line, included file), ...]}
    for f in repo.sources:
        u = unit_of(f)
        edges.setdefault(u, {})
        for ln, _, _, target in repo.includes[f]:
            if target is not None and checked(target) and unit_of(target) != u:
                edges[u].setdefault(unit_of(target), []).append((f, ln, target))
    for comp in sccs(edges):
        members = sorted(comp)
        cyc = shortest_cycle(edges, members[0], set(comp))
        way = [edges[a][b][0] for a, b in zip(cyc, cyc[1:])]
        inner = sorted(e for a in comp for b in edges[a] if b in comp for e in edges[a][b])
        out.append((way[0][0], way[0][1], "circle",
                    "include circle between %d units: %s (one way round: %s; all %d includes "
                    "inside it: %s)" % (
                        len(members), ", ".join(members),
                        "; ".join("%s:%d includes %s" % e for e in way), len(inner),
                        ", ".join("%s:%d" % e[:2] for e in inner))))


def sccs(edges):
    """Tarjan's strongly connected components with more than one member, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return sorted(out, key=lambda c: sorted(c)[0])


def shortest_cycle(edges, start, comp):
    """start, ..., start: the shortest way round inside comp (breadth first)."""
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w not in comp:
                    continue
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]


def check_layers(repo, out):
    unknown = set()
    for f in repo.sources:
        src = folder_of(f)
        if src not in LAYERS:
            if src not in unknown:
                unknown.add(src)
                out.append((f, 1, "layer", "folder %s/ is not in the layer map (LAYERS in "
                            "tests/e2e/layers.py), so nothing says what it may include" % src))
            continue
        allowed = LAYERS[src]
        for ln, _, name, target in repo.includes[f]:
            if target is None:
                continue
            dst = folder_of(target)
            if dst == src or allowed is None or dst in allowed:
                continue
            if dst in NOT_CHECKED:
                why = "%s/ is test or benchmark code" % dst
            else:
                why = "%s/ may include only %s" % (
                    src, ", ".join(a + "/" for a in allowed) or "nothing of ours")
            out.append((f, ln, "layer", "%s includes %s: %s" % (f, target, why)))


def check_mhd(repo, out):
    """Directly, outside http/; and through an http/ header that others include."""
    for f in repo.sources:
        if folder_of(f) == HTTP_FOLDER:
            continue
        for ln, _, name, _ in repo.includes[f]:
            if os.path.basename(name) in HTTP_ONLY_HEADERS:
                out.append((f, ln, "mhd", "%s includes <%s> outside %s/" % (f, name, HTTP_FOLDER)))
    reach = closures(repo)
    for h in repo.sources:
        if folder_of(h) != HTTP_FOLDER:
            continue
        for ln, _, name, _ in repo.includes[h]:
            if os.path.basename(name) not in HTTP_ONLY_HEADERS:
                continue
            users = sorted(f for f in repo.sources
                           if folder_of(f) != HTTP_FOLDER and h in reach[f])
            if users:
                per = {}
                for u in users:
                    per[folder_of(u)] = per.get(folder_of(u), 0) + 1
                out.append((h, ln, "mhd", "%s includes <%s> and is itself included outside %s/, so "
                            "<%s> reaches %d files there (%s; e.g. %s)" % (
                                h, name, HTTP_FOLDER, name, len(users),
                                ", ".join("%s/ %d" % kv for kv in sorted(per.items())),
                                ", ".join(sorted(users, key=lambda u: folder_of(u) != "daemon")[:3])
                            )))


def closures(repo):
    """file -> every repository file its includes reach, directly or not."""
    direct = {f: {t for _, _, _, t in repo.includes[f] if t in repo.includes} for f in repo.sources}
    reach = {}
    for f in repo.sources:
        seen, todo = set(), list(direct[f])
        while todo:
            t = todo.pop()
            if t not in seen:
                seen.add(t)
                todo.extend(direct.get(t, ()))
        reach[f] = seen
    return reach


def check_sizes(repo, out):
    for f in repo.sources:
        n = repo.text[f].count("\n") + (0 if repo.text[f].endswith("\n") or not repo.text[f] else 1)
        if n > MAX_LINES:
            out.append((f, MAX_LINES + 1, "size", "%s has %d lines, over %d" % (f, n, MAX_LINES)))


def cite_problem(repo, f, tok):
    """None when tok names a file that exists (or is no repository file), else why not."""
    if os.path.basename(tok) in OUTSIDE and tok not in repo.all_set:
        repl = OUTSIDE[os.path.basename(tok)]
        return "%s is not in the repository%s" % (
            tok, "; the repository's own is %s" % repl if repl else "; say the rule itself")
    if tok in RUNTIME_NAMES or tok in EXTERNAL or os.path.basename(tok) in RUNTIME_NAMES:
        return None
    if tok in repo.system_headers:
        return None
    if tok.startswith(("/", "~", "$")) or re.match(r"<[^>/]*>/", tok):
        return None  # a route, an absolute path, $HOME/..., <data>/...: not ours
    if tok.startswith(RUNTIME_DIRS):
        return None
    rel = os.path.normpath(os.path.join(os.path.dirname(f), tok))
    if tok in repo.all_set or os.path.normpath(tok) in repo.all_set or rel in repo.all_set:
        return None
    if re.search(r"[*?<{]", tok):  # a pattern: server/api/<resource>.c, tests/e2e/*.sh
        pat = re.sub(r"<[^>]*>", "*", tok)
        pat = re.sub(r"\{[^}]*\}", "*", pat)
        hits = [p for p in repo.all if fnmatch.fnmatch(p, pat)
                or fnmatch.fnmatch(p, os.path.normpath(os.path.join(os.path.dirname(f), pat)))]
        return None if hits else "no file matches %s" % tok
    if "/" not in tok:
        hits = repo.by_base.get(tok, [])
        if len(hits) == 1:
            return None
        if len(hits) > 1:
            return "%s names %d files (%s): cite it by path" % (
                tok, len(hits), ", ".join(hits[:4]) + (", ..." if len(hits) > 4 else ""))
    return "%s does not exist" % tok


def check_cites(repo, out):
    for f in repo.sources:
        for ln, text in repo.comments[f]:
            text = URL_RE.sub(" ", text)
            for m in TOKEN_RE.finditer(text):
                tok = m.group(0).rstrip(".")
                before = text[:m.start()]
                after = text[m.end():]
                if (tok.startswith("<") or before.endswith("<")) and after.startswith(">"):
                    continue  # <sys/file.h>: a system header
                if MAN_RE.match(after):
                    continue  # a man page: sysctl.conf(5)
                if "." == tok[:1] and "/" not in tok:
                    continue  # an extension on its own: ".c", ".json"
                why = cite_problem(repo, f, tok)
                if why:
                    out.append((f, ln, "cite", "comment cites %s: %s" % (tok, why)))


def run(root, stream=sys.stdout):
    repo = Repo(root)
    out = []
    for check in (check_circles, check_layers, check_mhd, check_sizes, check_cites):
        check(repo, out)
    counts = {k: 0 for k in KINDS}
    for kind in KINDS:
        rows = sorted((f, ln, msg) for f, ln, k, msg in out if k == kind)
        counts[kind] = len(rows)
        for f, ln, msg in rows:
            print("%s:%d: %s: %s. Fix: %s" % (f, ln, kind, msg, FIX[kind]), file=stream)
    print("layers: %d source files; %s" % (len(repo.sources), ", ".join(
        "%s %d" % (k, counts[k]) for k in KINDS)), file=stream)
    return counts, out


# ---- the self-test ---------------------------------------------------------------------------
CLEAN = {
    "base/mg.h": '#pragma once\n/* errors: see docs/design.md and base/mg.c; '
                 'https://x.org/a/b.c */\n'
                 '#include <sys/file.h>\nint mg(void);\n',
    "base/mg.c": '/* mg.c - open(2), flock via <sys/file.h>, sysctl.conf(5), writes data.pkl and '
                 '~/.config/x/config.json; GET /openapi.json; tests/*.sh; http/<name>.c; '
                 '<data>/blobs/x.json, blobs/sha256/ab.json, $DIR/x.sh; '
                 'an index.json, a Keras config.json, CPython\'s Lib/pickle.py */\n'
                 '#include "mg.h"\nint mg(void) { return 0; } /* sys/file.h */\n',
    "os/file.h": '#pragma once\n#include "../base/mg.h"\nint os_file(void);\n',
    "os/file.c": '#include "file.h"\n#include "os/file_int.h"\n'
                 'int os_file(void) { return mg(); }\n',
    "os/file_int.h": '#pragma once\n// file.c\'s private parts, see ../base/mg.h\n',
    "http/http.h": '#pragma once\n#include "base/mg.h"\n',
    "http/http_int.h": '#pragma once\n#include <microhttpd.h>\n#include "http.h"\n',
    "http/http.c": '#include "http_int.h"\nconst char *s = "/* API.md */";\n',
    "daemon/main.c": '#include "../http/http.h"\n#include "../os/file.h"\n'
                     'int main(void) { return 0; }\n',
    "docs/design.md": "map\n",
    "tests/t.c": '#include <microhttpd.h>\n/* API.md */\n',
    "tests/e2e/a.sh": "true\n",
}
PLANTED = {
    # x.c + x.h and y.c + y.h include each other: one circle, os/x and os/y.
    "os/x.h": '#pragma once\nint x(void);\n',
    "os/x.c": '#include "x.h"\n#include "y.h"\n',
    "os/y.h": '#pragma once\nint y(void);\n',
    "os/y.c": '#include "y.h"\n\n#include "x.h"\n',
    # base/ may include nothing of ours.
    "base/bad.c": '#include "../base/mg.h"\n#include "../os/file.h"\n',
    # libmicrohttpd outside http/.
    "daemon/opts.c": '/* options */\n#include <microhttpd.h>\n',
    # and through an http/ header that daemon/ includes
    "http/leak.h": '#pragma once\n#include "http_int.h"\n',
    "daemon/wire.c": '#include "http/leak.h"\n',
    # 1,001 lines.
    "os/long.c": "int z;\n" * 1001,
    # a comment citing a missing file, and one citing API.md.
    "os/cite.c": "/* see os/gone.c and the contract */\n// in API.md\n",
}
EXPECTED = {
    ("circle", "os/x.c", 2), ("layer", "base/bad.c", 2), ("mhd", "daemon/opts.c", 2),
    ("mhd", "http/http_int.h", 2),
    ("size", "os/long.c", 1001), ("cite", "os/cite.c", 1), ("cite", "os/cite.c", 2),
}


def make_tree(files):
    d = tempfile.mkdtemp(prefix="mg-layers.")
    for path, text in files.items():
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(text)
    subprocess.run(["git", "-C", d, "init", "-q"], check=True)
    subprocess.run(["git", "-C", d, "add", "-A"], check=True)
    return d


def self_test():
    import io
    import shutil
    ok = True
    for name, files, want in (("clean tree", CLEAN, set()),
                              ("planted tree", dict(CLEAN, **PLANTED), EXPECTED)):
        d = make_tree(files)
        try:
            buf = io.StringIO()
            _, out = run(d, stream=buf)
        finally:
            shutil.rmtree(d)
        got = {(k, f, ln) for f, ln, k, _ in out}
        if got != want:
            ok = False
            print("not ok - %s: missed %s, unexpected %s" % (
                name, sorted(want - got), sorted(got - want)))
            print(buf.getvalue())
        else:
            print("ok - %s: %d violations, as planted" % (name, len(got)))
    # the map itself must be a ladder: no circle between folders
    folder_edges = {k: {v: 1 for v in (LAYERS[k] or ())} for k in LAYERS}
    bad = [k for k, v in LAYERS.items() if v is not None and any(x not in LAYERS for x in v)]
    if sccs(folder_edges) or bad:
        ok = False
        print("not ok - LAYERS has a circle or names an unknown folder: %s %s" % (
            sccs(folder_edges), bad))
    else:
        print("ok - LAYERS has no circle")
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print("usage: layers.py [REPO_ROOT] | --self-test", file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], check=True, stdout=subprocess.PIPE,
        cwd=os.path.dirname(os.path.abspath(__file__))).stdout.decode().strip()
    counts, _ = run(root)
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
