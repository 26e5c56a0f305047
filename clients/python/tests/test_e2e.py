"""The Python client against a real modelgated (driven by tests/e2e/test_python_client.sh).

Environment: MG_URL, MG_DATA (the daemon's data directory), MG_WORK (a scratch directory),
MODELGATE_CLI (the C CLI), tokens ADMIN_TOKEN PUB_TOKEN DEP_TOKEN REV_TOKEN RD_TOKEN, and
MG_EXPECT_SITE (the directory the package must have been imported from: the installed copy,
not the source tree). Exits non-zero when any check fails.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple, Type
from urllib.parse import parse_qs, urlsplit

import modelgate

URL = os.environ["MG_URL"]
DATA = os.environ["MG_DATA"]
WORK = os.environ["MG_WORK"]
CLI = os.environ["MODELGATE_CLI"]
ADMIN = os.environ["ADMIN_TOKEN"]
PUB = os.environ["PUB_TOKEN"]
DEP = os.environ["DEP_TOKEN"]
REV = os.environ["REV_TOKEN"]
RD = os.environ["RD_TOKEN"]

passed = 0
failed = 0


def ok(desc: str) -> None:
    global passed
    passed += 1
    print(f"ok - {desc}", flush=True)


def not_ok(desc: str, why: str = "") -> None:
    global failed
    failed += 1
    print(f"not ok - {desc}{': ' + why if why else ''}", flush=True)


def check(desc: str, cond: bool, why: str = "") -> None:
    if cond:
        ok(desc)
    else:
        not_ok(desc, why)


def raises(desc: str, fn: Callable[[], Any], cls: Type[BaseException],
           code: Optional[str] = None,
           status: Optional[int] = None) -> Optional[modelgate.ModelgateError]:
    """fn() must raise cls (with that API code and status); returns the exception."""
    try:
        fn()
    except cls as e:
        assert isinstance(e, modelgate.ModelgateError)
        if code is not None and e.code != code:
            not_ok(desc, f"code {e.code!r}, wanted {code!r} ({e})")
        elif status is not None and e.status != status:
            not_ok(desc, f"status {e.status}, wanted {status} ({e})")
        else:
            ok(f"{desc} ({e})")
        return e
    except Exception as e:  # noqa: BLE001 - any other exception is the failure reported
        not_ok(desc, f"raised {type(e).__name__}: {e}")
        return None
    not_ok(desc, "nothing was raised")
    return None


def section(fn: Callable[[], None]) -> Callable[[], None]:
    """Run a block of checks; an unexpected exception fails it instead of the whole run."""
    def run() -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001
            not_ok(f"{fn.__name__} raised", traceback.format_exc())
    return run


def client(token: str, **kw: Any) -> modelgate.Client:
    return modelgate.Client(URL, token, **kw)


def wait_until(what: str, cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll cond until true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    print(f"# gave up waiting for {what}", flush=True)
    return False


def make_tree(root: str) -> None:
    """Names that take every path of the packer: long, split, pax, UTF-8, empty things."""
    files = {
        "weights.dat": os.urandom(300000),
        "config.json": b'{"hidden": 64}\n',
        "empty.bin": b"",
        "tokenizer/vocab.txt": b"a\nb\nc\n",
        "n" * 100: b"a name of exactly 100 bytes",
        "d" * 60 + "/" + "f" * 60: b"split into prefix and name",
        "d" * 60 + "/" + "g" * 101: b"too long to split: a pax path",
        "/".join(["p" * 50] * 4) + "/" + "q" * 90: b"a long prefix",
        "h\u00e9llo/w\u00f6rld.txt": b"UTF-8 names",
        "\u65e5\u672c/" + "\u9577" * 40 + ".bin": b"a long UTF-8 name",
        "sub/a-b": b"sorted", "sub/a/x": b"like strcmp",
    }
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(root, "sub", "empty"))
    run = os.path.join(root, "serve.sh")
    with open(run, "wb") as f:
        f.write(b"#!/bin/sh\necho serving\n")
    os.chmod(run, 0o755)


def tree_files(root: str) -> Dict[str, Tuple[str, bool]]:
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            st = os.lstat(p)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = (hashlib.sha256(f.read()).hexdigest(),
                                                 bool(st.st_mode & stat.S_IXUSR))
    return out


def cli(token: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MODELGATE_URL=URL, MODELGATE_TOKEN=token)
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=300)


TREE = os.path.join(WORK, "tree")
state: Dict[str, Any] = {}


@section
def installed_copy() -> None:
    where = os.path.dirname(os.path.abspath(modelgate.__file__))
    check("the installed package is the one under test", where.startswith(
        os.environ["MG_EXPECT_SITE"]), where)
    check("py.typed ships with it", os.path.isfile(os.path.join(where, "py.typed")))


@section
def configuration() -> None:
    env = dict(os.environ)
    try:
        os.environ["MODELGATE_URL"] = URL
        os.environ["MODELGATE_TOKEN"] = PUB
        os.environ.pop("MODELGATE_OIDC_TOKEN", None)
        check("Client() reads MODELGATE_URL and MODELGATE_TOKEN",
              modelgate.Client().whoami().get("name") == "pub")
        check("an explicit token beats the environment",
              modelgate.Client(token=DEP).whoami().get("name") == "dep")
        del os.environ["MODELGATE_URL"], os.environ["MODELGATE_TOKEN"]
        cfg = os.path.join(WORK, "xdg")
        os.environ["XDG_CONFIG_HOME"] = cfg
        raises("no server anywhere: ConfigError", lambda: modelgate.Client(),
               modelgate.ConfigError, "config")
        tf = os.path.join(WORK, "rd.token")
        with open(tf, "w") as f:
            f.write(RD + "\n")
        r = subprocess.run([CLI, "login", "--url", URL + "/", "--token-file", tf],
                           env=dict(os.environ), capture_output=True, text=True, timeout=60)
        check("the CLI logs in (writes its config file)", r.returncode == 0, r.stderr)
        check("Client() reads the CLI's config file",
              modelgate.Client().whoami().get("name") == "rd")
        os.environ["MODELGATE_URL"] = URL
        check("MODELGATE_URL naming the same server takes the saved token",
              modelgate.Client().whoami().get("name") == "rd")
        raises("the saved token is never sent to another server",
               lambda: modelgate.Client("http://127.0.0.1:9"), modelgate.ConfigError,
               "config")
    finally:
        os.environ.clear()
        os.environ.update(env)
    raises("a bad token: Unauthenticated with the API's code",
           lambda: client("mg_not_a_real_token").whoami(), modelgate.Unauthenticated,
           "unauthenticated", 401)
    raises("nothing listening: TransportError after retries",
           lambda: modelgate.Client("http://127.0.0.1:9", PUB, retries=1).whoami(),
           modelgate.TransportError, "transport")


@section
def push_and_read_back() -> None:
    make_tree(TREE)
    mg = client(PUB)
    ds = "sha256:" + hashlib.sha256(b"the training set").hexdigest()
    v = mg.push("fraud", TREE, metrics={"auc": 0.94, "loss": 0.12}, params={"lr": 0.001,
                "epochs": 12}, datasets=[{"digest": ds, "name": "fraud-train",
                                          "role": "train"}],
                tags={"team": "risk"}, description="first python push", create_model=True,
                run_id="train-1")
    state["v1"] = v.version
    state["digest"] = v.digest
    check("push returns the new version", v.version == 1, str(v))
    check("the digest is the tree's (tree_digest)", v.digest == modelgate.tree_digest(TREE))
    back = mg.version("fraud", v.version)
    check("read back: metrics", back.metrics == {"auc": 0.94, "loss": 0.12}, str(back))
    check("read back: params", back.get("params") == {"lr": 0.001, "epochs": 12})
    check("read back: tags, description, run_id",
          back.get("tags") == {"team": "risk"} and back.get("description") ==
          "first python push" and back.get("run_id") == "train-1")
    check("read back: datasets", [d.get("digest") for d in back.get("datasets", [])] == [ds])
    art = back.get("artifact") or {}
    check("read back: a tar of every file", art.get("media_type") == "application/x-tar" and
          art.get("files") == len(tree_files(TREE)), str(art))
    check("read back: created by the pushing token", back.get("created_by") == "pub")

    r = cli(PUB, "push", "fraud", TREE, "--json")
    check("the CLI pushes the same tree", r.returncode == 0, r.stderr)
    cli_v = json.loads(r.stdout) if r.returncode == 0 else {}
    check("the CLI's push has the same digest (byte-identical archive)",
          (cli_v.get("artifact") or {}).get("digest") == v.digest,
          f"cli {(cli_v.get('artifact') or {}).get('digest')} python {v.digest}")
    state["v2"] = cli_v.get("version")
    v3 = mg.push("fraud", os.path.join(TREE, "config.json"), metrics={"auc": 0.5})
    check("a single file is pushed as it is", v3.digest == "sha256:" + hashlib.sha256(
        b'{"hidden": 64}\n').hexdigest() and (v3.get("artifact") or {}).get("files") is None,
          str(v3.get("artifact")))
    state["v3"] = v3.version


def _random_tree(root: str, seed: int) -> None:
    """Random names at ustar's edges: 99-101 and 154-156 bytes, deep paths, UTF-8."""
    import random
    r = random.Random(seed)
    alpha = "abcxyz._-"
    uni = "\u00e9\u00fc\u65e5\u672c\u00df"

    def seg() -> str:
        n = r.choice([1, 5, 20, 50, 98, 99, 100, 101, 120, 154, 155, 156, 200])
        t = "".join(r.choice(alpha + (uni if r.random() < 0.3 else "")) for _ in range(n))
        while len(t.encode()) > 255:
            t = t[:-1]
        return "q" if t in (".", "..") else t
    os.makedirs(root)
    for _ in range(25):
        parts = [seg() for _ in range(r.randint(1, 7))]
        while len("/".join(parts).encode()) > 1000:
            parts = parts[1:]
        full = os.path.join(root, *parts)
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if r.random() < 0.2:
                os.makedirs(full, exist_ok=True)
            else:
                with open(full, "wb") as f:
                    f.write(os.urandom(r.randint(0, 1500)))
        except OSError:
            pass  # a name already taken by a file or directory


@section
def same_digest_as_cli() -> None:
    bad = []
    for seed in range(8):
        d = os.path.join(WORK, f"random-{seed}")
        _random_tree(d, seed)
        r = cli(PUB, "push", "fraud", d, "--json")
        got = json.loads(r.stdout)["artifact"]["digest"] if r.returncode == 0 else r.stderr
        if got != modelgate.tree_digest(d):
            bad.append(f"seed {seed}: cli {got}")
    check("8 random trees at ustar's name limits: the CLI's digest is tree_digest()'s",
          not bad, "; ".join(bad))


@section
def metrics() -> None:
    mg = client(PUB)
    n = state["v1"]
    v = mg.log_metrics("fraud", n, {"f1": 0.81, "epoch_3_loss": 0.2})
    check("log_metrics appends", v.metrics == {"auc": 0.94, "loss": 0.12, "f1": 0.81,
                                               "epoch_3_loss": 0.2}, str(v.metrics))
    names = [h.get("name") for h in v.get("metrics_history", [])]
    check("metrics_history records the appended names", "f1" in names and "auc" in names,
          str(names))
    again = mg.log_metrics("fraud", n, {"f1": 0.81})
    check("the same value again is accepted (retry-safe)", again.metrics.get("f1") == 0.81)
    raises("another value for a metric: Conflict with the API's code",
           lambda: mg.log_metrics("fraud", n, {"f1": 0.9}), modelgate.Conflict, "conflict",
           409)
    raises("a non-finite metric is refused before sending",
           lambda: mg.log_metrics("fraud", n, {"nan": float("nan")}),
           modelgate.InvalidArgument, "invalid_argument")


@section
def errors() -> None:
    mg = client(PUB)
    e = raises("400: invalid_argument with the API's field",
               lambda: mg.push("fraud", os.path.join(TREE, "config.json"),
                               datasets=[{"digest": "sha256:" + "0" * 64, "role": "bogus"}]),
               modelgate.InvalidArgument, "invalid_argument", 400)
    check("... the error names the field", bool(e and e.field), str(e and e.field))
    raises("403: a reader cannot push (forbidden)",
           lambda: client(RD).push("fraud", TREE), modelgate.Forbidden, "forbidden", 403)
    raises("409: creating an existing model without exist_ok",
           lambda: mg.create_model("fraud", exist_ok=False), modelgate.Conflict, "conflict",
           409)
    raises("404: a version that does not exist", lambda: mg.version("fraud", 999),
           modelgate.NotFound, "not_found", 404)
    raises("a bad model name never leaves the client", lambda: mg.version("Bad/Name", 1),
           modelgate.InvalidArgument, "invalid_argument")
    raises("a symbolic link in the tree is refused, naming it",
           lambda: _push_with_link(mg), modelgate.PackError, "pack")


def _push_with_link(mg: modelgate.Client) -> None:
    d = os.path.join(WORK, "linked")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "real"), "w") as f:
        f.write("x")
    if not os.path.islink(os.path.join(d, "link")):
        os.symlink("real", os.path.join(d, "link"))
    mg.push("fraud", d)


@section
def promotions_and_lkg() -> None:
    admin = client(ADMIN)
    dep = client(DEP)
    rev = client(REV)
    n = state["v1"]
    raises("no LKG yet: the API's no_known_good",
           lambda: dep.lkg("fraud", "production"), modelgate.APIError, "no_known_good")
    admin._t.call("PUT", "/api/v1/models/fraud/policies/production", {
        "thresholds": [{"metric": "auc", "op": ">=", "value": 0.9}],
        "approvals": {"required": 1},
        "rollout": {"steps": [100], "bake_seconds": 0, "auto_advance": True}})
    p = dep.promote("fraud", n, "production", reason="python e2e")
    check("promote returns the promotion", p.data.get("version") == n and not p.done,
          repr(p))
    check("the promotion comes to await approval",
          wait_until("awaiting_approval", lambda: p.refresh().state == "awaiting_approval"),
          p.state)
    waited: Dict[str, Any] = {}

    def waiter() -> None:
        try:
            waited["p"] = dep.promotion(p.id).wait(timeout=60)
        except Exception as e:  # noqa: BLE001
            waited["e"] = e
    t = threading.Thread(target=waiter)
    t.start()
    raises("403: a deployer cannot approve (forbidden)",
           lambda: client(DEP).promotion(p.id).approve("mine"), modelgate.Forbidden,
           "forbidden", 403)
    rev.promotion(p.id).approve("metrics look right")
    t.join(90)
    check("promotion(id).wait() returns when it succeeded",
          "p" in waited and waited["p"].state == "succeeded", str(waited))
    lkg = dep.lkg("fraud", "production")
    check("LKG after the promotion is the promoted version",
          lkg.get("version") == n and lkg.get("artifact") == state["digest"], str(lkg))
    raises("a failing threshold ends a promotion: wait() raises PromotionFailed",
           lambda: dep.promote("fraud", state["v3"], "production", wait=True, timeout=60),
           modelgate.PromotionFailed, "promotion_failed")
    client(PUB).log_metrics("fraud", state["v2"], {"auc": 0.95})
    p2 = dep.promote("fraud", state["v2"], "production")
    raises("409: promotion_in_progress surfaces with the API's code",
           lambda: dep.promote("fraud", state["v2"], "production"), modelgate.Conflict,
           "promotion_in_progress", 409)
    wait_until("awaiting_approval", lambda: p2.refresh().state == "awaiting_approval")
    rev.promotion(p2.id).reject("not this one")
    e = raises("a rejected promotion: wait() raises PromotionFailed",
               lambda: dep.promotion(p2.id).wait(timeout=30), modelgate.PromotionFailed)
    check("... carrying the last state",
          isinstance(e, modelgate.PromotionFailed) and e.promotion.get("state") == "rejected")


@section
def pull_and_verify() -> None:
    mg = client(RD)
    n = state["v1"]
    dest = os.path.join(WORK, "pulled")
    r = mg.pull("fraud", n, dest)
    check("pull writes every file", r.files == len(tree_files(TREE)), str(r))
    check("pulled files equal the pushed ones (bytes and exec bit)",
          tree_files(dest) == tree_files(TREE))
    check("verify() accepts the pulled tree", mg.verify("fraud", n, dest) == r.files)
    dest2 = os.path.join(WORK, "pulled-alias")
    r2 = mg.pull("fraud", "production", dest2)
    check("pull by alias takes the routed version", r2.version == n and
          tree_files(dest2) == tree_files(TREE))
    dest3 = os.path.join(WORK, "pulled-file")
    r3 = mg.pull("fraud", state["v3"], dest3)
    check("a single-file artifact is pulled as dest/artifact",
          r3.files == 1 and os.path.isfile(os.path.join(dest3, "artifact")))
    for name, make in (("model.tar.gz", _make_targz), ("model.zip", _make_zip)):
        art = os.path.join(WORK, name)
        make(art)
        va = client(PUB).push("fraud", art)
        out = os.path.join(WORK, "pulled-" + name)
        ra = mg.pull("fraud", va.version, out)
        check(f"a {name} artifact is unpacked and checked file by file",
              ra.files == 2 and tree_files(out) == {
                  "w/a.bin": (hashlib.sha256(b"A" * 5000).hexdigest(), False),
                  "b.txt": (hashlib.sha256(b"bee").hexdigest(), False)}, str(tree_files(out)))
    with open(os.path.join(dest, "config.json"), "ab") as f:
        f.write(b" ")
    raises("a tampered local file: verify() raises IntegrityError",
           lambda: mg.verify("fraud", n, dest), modelgate.IntegrityError, "integrity")
    raises("pull into a non-empty directory is refused",
           lambda: mg.pull("fraud", n, dest), modelgate.ModelgateError)

    # Tampering with the stored blob: same size, other bytes (as test_cli.sh does).
    v = client(PUB).push("fraud", _tamper_tree())
    hexd = v.digest[7:]
    blob = os.path.join(DATA, "blobs", "sha256", hexd[:2], hexd)
    check("the blob is where DESIGN.md says", os.path.isfile(blob), blob)
    os.chmod(blob, 0o644)
    with open(blob, "r+b") as f:
        b = f.read()
        i = b.find(b"tamper me")
        f.seek(i)
        f.write(b"TAMPERED!")
    out = os.path.join(WORK, "pulled-tampered")
    raises("pull of a tampered artifact raises IntegrityError",
           lambda: mg.pull("fraud", v.version, out), modelgate.IntegrityError, "integrity")
    check("... and creates nothing", not os.path.exists(out))
    check("... and leaves no staging directory",
          not any(".pull-" in x for x in os.listdir(WORK)), str(os.listdir(WORK)))


def _make_targz(path: str) -> None:
    import io
    import tarfile
    with tarfile.open(path, "w:gz") as tf:
        for name, data in (("./w/a.bin", b"A" * 5000), ("./b.txt", b"bee")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))


def _make_zip(path: str) -> None:
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("w/a.bin", b"A" * 5000)
        zf.writestr("b.txt", b"bee")


def _tamper_tree() -> str:
    d = os.path.join(WORK, "tamper")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file.txt"), "w") as f:
        f.write("tamper me")
    return d


class FlakyProxy:
    """A TCP proxy to the daemon that drops the next `drop` connections after reading
    the start of their request, without answering: "no answer" as a client sees it."""

    def __init__(self, target: str) -> None:
        t = urlsplit(target)
        self.target = (t.hostname or "127.0.0.1", t.port or 80)
        self.drop = 0
        self.accepted = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.drop > 0:
                self.drop -= 1
                c.recv(65536)
                c.close()
                continue
            u = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@section
def retries() -> None:
    px = FlakyProxy(URL)
    try:
        mg = modelgate.Client(px.url, PUB, retries=3)
        px.drop = 2
        v = mg.version("fraud", state["v1"])
        check("a GET without an answer is retried", v.version == state["v1"] and
              px.accepted == 3, f"accepted {px.accepted}")
        mg.close()
        px.drop, px.accepted = 2, 0
        blob = mg.upload(TREE)
        check("a blob upload without an answer is retried (content addressed)",
              blob.get("digest") == state["digest"] and px.accepted == 3,
              f"accepted {px.accepted}")
        mg.close()
        px.drop, px.accepted = 1, 0
        raises("a version or model POST that went out unanswered is not repeated",
               lambda: mg.create_model("retry-once", exist_ok=False),
               modelgate.TransportError, "transport")
        check("... one attempt only", px.accepted == 1, f"accepted {px.accepted}")
        raises("... and nothing was created behind the client's back",
               lambda: client(RD)._t.call("GET", "/api/v1/models/retry-once"),
               modelgate.NotFound, "not_found", 404)
        px.drop, px.accepted = 0, 0
        mg.create_model("retry-once", exist_ok=False)
        check("the same call goes through once the server answers", px.accepted <= 1)
    finally:
        px.close()


@section
def big_upload_constant_memory() -> None:
    d = os.path.join(WORK, "big")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.truncate(1 << 30)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write("{}")
    code = (
        "import json, resource, sys, modelgate\n"
        "mg = modelgate.Client(sys.argv[1], sys.argv[2])\n"
        "v = mg.push('big', sys.argv[3], create_model=True, metrics={'auc': 0.9})\n"
        "push_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "p = mg.pull('big', v.version, sys.argv[4])\n"
        "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'version': v.version, 'digest': v.digest, 'files': p.files,\n"
        "                  'size': v['artifact']['size'], 'push_maxrss_kib': push_rss,\n"
        "                  'maxrss_kib': rss}))\n")
    pulled = os.path.join(WORK, "big-pulled")
    r = subprocess.run([sys.executable, "-c", code, URL, PUB, d, pulled],
                       capture_output=True, text=True, timeout=500)
    check("a 1 GiB file is pushed", r.returncode == 0, r.stderr[-2000:])
    if r.returncode != 0:
        return
    out = json.loads(r.stdout)
    print(f"# 1 GiB push: peak RSS {out['push_maxrss_kib'] / 1024:.1f} MiB; with its pull: "
          f"{out['maxrss_kib'] / 1024:.1f} MiB", flush=True)
    check("... in constant memory (peak RSS under 100 MiB)",
          out["push_maxrss_kib"] < 100 * 1024, f"{out['push_maxrss_kib']} KiB")
    check("... the whole archive arrived", out["size"] > 1 << 30, str(out))
    check("... and is pulled back, verified, in constant memory too",
          out["files"] == 2 and os.path.getsize(os.path.join(pulled, "weights.bin")) ==
          1 << 30 and out["maxrss_kib"] < 100 * 1024, str(out))
    shutil.rmtree(pulled, ignore_errors=True)
    raises("403 for a 1 GiB upload arrives before the body is sent (Expect: 100-continue)",
           lambda: client(RD).upload(d), modelgate.Forbidden, "forbidden", 403)
    cli_r = cli(PUB, "push", "big", d, "--json")
    check("... with the digest the CLI gives the same tree", cli_r.returncode == 0 and
          json.loads(cli_r.stdout)["artifact"]["digest"] == out["digest"], cli_r.stderr)


class _FakeIdP(http.server.BaseHTTPRequestHandler):
    """Stands in for the token exchange endpoint, which the server does not have yet (M21)."""

    seen: List[Dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.seen.append({"path": self.path, "ctype": self.headers.get("Content-Type"),
                          "auth": self.headers.get("Authorization"), "form": form})
        if form.get("subject_token") != "ci.jwt.token":
            self._reply(400, {"error": {"code": "invalid_grant",
                                        "message": "the token's audience is not modelgate"}})
            return
        self._reply(200, {"access_token": "mg_exchanged", "token_type": "Bearer",
                          "issued_token_type":
                          "urn:ietf:params:oauth:token-type:access_token",
                          "expires_in": 900})

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
        self._reply(200, {"name": "ci", "roles": ["publisher"]})


@section
def trusted_publishing() -> None:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeIdP)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        env = dict(os.environ)
        try:
            os.environ.pop("MODELGATE_TOKEN", None)
            os.environ["MODELGATE_OIDC_TOKEN"] = "ci.jwt.token"
            mg = modelgate.Client(base)
            who = mg.whoami()
        finally:
            os.environ.clear()
            os.environ.update(env)
        ex = _FakeIdP.seen[0] if _FakeIdP.seen else {}
        form = ex.get("form", {})
        check("MODELGATE_OIDC_TOKEN is exchanged at POST /api/v1/tokens/exchange",
              ex.get("path") == "/api/v1/tokens/exchange" and who.get("name") == "ci", str(ex))
        check("... as an RFC 8693 form without a bearer",
              ex.get("ctype") == "application/x-www-form-urlencoded" and ex.get("auth") is None
              and form.get("grant_type") ==
              "urn:ietf:params:oauth:grant-type:token-exchange" and
              form.get("subject_token_type") == "urn:ietf:params:oauth:token-type:id_token",
              str(form))
        check("... and the exchanged token is the bearer afterwards",
              _FakeIdP.seen[-1].get("auth") == "Bearer mg_exchanged", str(_FakeIdP.seen))
        mg.whoami()
        check("... exchanged once, not per call",
              sum(1 for s in _FakeIdP.seen if s["path"].endswith("/exchange")) == 1)
        raises("a refused exchange surfaces the API's code",
               lambda: modelgate.Client(base, oidc_token="other.jwt").whoami(),
               modelgate.InvalidArgument, "invalid_grant", 400)
    finally:
        srv.shutdown()
        srv.server_close()
    # The real server: refused (404 until M21 adds the endpoint, then 400 invalid_grant).
    raises("the real server refuses a made-up OIDC token",
           lambda: modelgate.Client(URL, oidc_token="not.a.jwt").whoami(), modelgate.APIError)


def main() -> int:
    for step in (installed_copy, configuration, push_and_read_back, same_digest_as_cli,
                 metrics, errors, promotions_and_lkg, pull_and_verify, retries,
                 big_upload_constant_memory, trusted_publishing):
        step()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"# test process peak RSS {rss / 1024:.1f} MiB", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
