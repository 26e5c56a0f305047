"""modelgate.Client: push, metrics, promotions, last-known-good and pull over the REST API."""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from . import _config, _pull, _tar
from ._errors import (APIError, ConfigError, IntegrityError, InvalidArgument, ModelgateError,
                      PromotionFailed, ServerError, TransportError, WaitTimeout)
from ._http import Transport

MODEL_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
ALIAS_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
PROMOTION_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TOKEN_TYPE_ID = "urn:ietf:params:oauth:token-type:id_token"
TOKEN_TYPE_ACCESS = "urn:ietf:params:oauth:token-type:access_token"

PROMOTION_STATES = ("evaluating", "awaiting_approval", "rolling_out", "succeeded", "rejected",
                    "aborted", "rolled_back")
PROMOTION_FAILED = ("rejected", "aborted", "rolled_back")
POLL_FIRST_S = 0.25
POLL_MAX_S = 5.0
POLL_TRANSIENT_MAX = 10  # consecutive failed polls before giving up (as the CLI)

Json = Dict[str, Any]


def _check_model(model: str) -> str:
    if not isinstance(model, str) or not MODEL_RE.fullmatch(model):
        raise InvalidArgument(f"'{model}' is not a model name (^[a-z0-9][a-z0-9._-]{{0,62}}$)",
                              code="invalid_argument", field="model")
    return model


def _check_alias(alias: str) -> str:
    if not isinstance(alias, str) or not ALIAS_RE.fullmatch(alias):
        raise InvalidArgument(f"'{alias}' is not an alias name (^[a-z][a-z0-9-]{{0,31}}$)",
                              code="invalid_argument", field="alias")
    return alias


def _check_version(version: Any) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidArgument(f"the version must be a whole number from 1, not {version!r}",
                              code="invalid_argument", field="version")
    return version


def _check_metrics(metrics: Mapping[str, Any], field: str = "metrics") -> Dict[str, float]:
    out: Dict[str, float] = {}
    for k, v in metrics.items():
        if not isinstance(k, str) or not k:
            raise InvalidArgument(f"metric names are non-empty strings, not {k!r}",
                                  code="invalid_argument", field=field)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InvalidArgument(f"metric '{k}' needs a finite number, not {v!r}",
                                  code="invalid_argument", field=f"{field}.{k}")
        out[k] = v
    return out


class Version(Dict[str, Any]):
    """A version record (API.md "Version") with shortcuts for the common fields."""

    @property
    def model(self) -> str:
        return str(self.get("model", ""))

    @property
    def version(self) -> int:
        return int(self.get("version", 0))

    @property
    def digest(self) -> str:
        art = self.get("artifact") or {}
        return str(art.get("digest", "")) if isinstance(art, dict) else ""

    @property
    def metrics(self) -> Dict[str, float]:
        m = self.get("metrics") or {}
        return dict(m) if isinstance(m, dict) else {}


@dataclass
class Pulled:
    """What pull() wrote: every file checked against the digest the server lists."""

    model: str
    version: int
    path: str
    digest: str
    files: int


class Promotion:
    """A promotion: .data is its latest record (API.md "Promotion")."""

    def __init__(self, client: "Client", data: Json) -> None:
        self._client = client
        self.data = data
        pid = data.get("id")
        if not isinstance(pid, str) or not PROMOTION_RE.fullmatch(pid):
            raise ModelgateError("the server returned a promotion without a usable id",
                                 code="bad_reply")
        self.id: str = pid

    def __repr__(self) -> str:
        return (f"Promotion({self.id!r}, {self.data.get('model')} "
                f"v{self.data.get('version')} -> {self.data.get('alias')}: {self.state})")

    @property
    def state(self) -> str:
        return str(self.data.get("state", ""))

    @property
    def done(self) -> bool:
        return self.state in ("succeeded",) + PROMOTION_FAILED

    def _set(self, data: Any) -> "Promotion":
        if not isinstance(data, dict) or data.get("state") not in PROMOTION_STATES:
            raise ModelgateError("the server's reply names no known promotion state; "
                                 "refusing to guess", code="bad_reply")
        self.data = data
        return self

    def refresh(self) -> "Promotion":
        return self._set(self._client._t.call("GET", f"/api/v1/promotions/{self.id}"))

    def approve(self, comment: Optional[str] = None) -> "Promotion":
        body: Json = {"decision": "approve"}
        if comment:
            body["comment"] = comment
        return self._set(self._client._t.call(
            "POST", f"/api/v1/promotions/{self.id}/approvals", body))

    def reject(self, comment: str) -> "Promotion":
        return self._set(self._client._t.call(
            "POST", f"/api/v1/promotions/{self.id}/approvals",
            {"decision": "reject", "comment": comment}))

    def advance(self) -> "Promotion":
        return self._set(self._client._t.call(
            "POST", f"/api/v1/promotions/{self.id}/advance", {}))

    def abort(self, reason: str) -> "Promotion":
        return self._set(self._client._t.call(
            "POST", f"/api/v1/promotions/{self.id}/abort", {"reason": reason}))

    def wait(self, timeout: float = 3600.0, raise_on_failure: bool = True) -> "Promotion":
        """Poll until the promotion ends or timeout seconds pass (250 ms, backing off to
        5 s; up to 10 consecutive transient failures ridden out, as the CLI does).

        Returns self when it succeeded. PromotionFailed when it was rejected, aborted or
        rolled back (unless raise_on_failure is False), WaitTimeout at the deadline.
        """
        deadline = time.monotonic() + timeout
        interval = POLL_FIRST_S
        transient = 0
        while not self.done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"timed out after {timeout:g} s waiting for promotion "
                                  f"{self.id} (state: {self.state})", self.data)
            time.sleep(min(interval, left))
            interval = min(POLL_MAX_S, interval * 1.5)
            try:
                self.refresh()
            except (TransportError, ServerError):
                transient += 1
                if transient >= POLL_TRANSIENT_MAX:
                    raise
                continue
            transient = 0
        if raise_on_failure and self.state in PROMOTION_FAILED:
            raise PromotionFailed(f"promotion {self.id} of {self.data.get('model')} "
                                  f"v{self.data.get('version')} to {self.data.get('alias')} "
                                  f"ended {self.state}{_explain(self.data)}", self.data)
        return self


def _explain(p: Json) -> str:
    why: List[str] = []
    for g in p.get("gates") or []:
        if isinstance(g, dict) and g.get("status") == "failed":
            why.append(f"gate {g.get('name')} failed: observed {g.get('observed')}, "
                       f"expected {g.get('expected')}")
    for a in p.get("approvals") or []:
        if isinstance(a, dict) and a.get("decision") == "reject":
            why.append(f"rejected by {a.get('by')}: {a.get('comment')}")
    return ("; " + "; ".join(why)) if why else ""


class Client:
    """A modelgate server.

    mg = modelgate.Client()                      # MODELGATE_URL / MODELGATE_TOKEN, or
                                                 # the CLI's config file
    v = mg.push("fraud", "out/", metrics={"auc": 0.94}, create_model=True)

    url, token: override the environment and the config file. oidc_token: a CI identity
    token (default $MODELGATE_OIDC_TOKEN) exchanged once for a short-lived modelgate token
    (POST /api/v1/tokens/exchange, RFC 8693) when no token is given; the exchanged token
    lasts what the server grants (expires_in), so create the Client when it is time to
    publish rather than at the start of a long training run. timeout: seconds a
    transfer may stall. retries: how often a call that is safe to repeat is retried.
    A Client may be shared between threads (calls are serialised).
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 oidc_token: Optional[str] = None, timeout: float = 300.0,
                 retries: int = 5) -> None:
        self._settings = _config.resolve(url, token, oidc_token)
        self.url = self._settings.url
        self._token = self._settings.token
        self._token_expires = math.inf
        self._token_lock = threading.Lock()
        self._t = Transport(self.url, self._bearer, timeout, retries)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._t.close()

    def __repr__(self) -> str:
        return f"modelgate.Client({self.url!r})"

    # ---- identity ----------------------------------------------------------------------

    def _bearer(self) -> str:
        with self._token_lock:
            if self._token is not None and time.monotonic() < self._token_expires:
                return self._token
            if self._settings.oidc_token is None:
                raise ConfigError("no token")
            if self._token is not None and self._settings.oidc_from_env:
                # expired: a CI identity token is accepted once, so take a fresh one if
                # the job has put one in the environment meanwhile
                fresh = os.environ.get("MODELGATE_OIDC_TOKEN")
                if fresh:
                    self._settings.oidc_token = _config.clean_token(fresh, "the OIDC token")
            self._exchange()
            assert self._token is not None
            return self._token

    def _exchange(self) -> None:
        """Trusted publishing (API.md "Identity"): the CI's OIDC token for a modelgate one."""
        assert self._settings.oidc_token is not None
        reply = self._t.call(
            "POST", "/api/v1/tokens/exchange", auth=False, idempotent=False, ok=(200,),
            form={"grant_type": GRANT_TOKEN_EXCHANGE,
                  "subject_token": self._settings.oidc_token,
                  "subject_token_type": TOKEN_TYPE_ID})
        tok = reply.get("access_token") if isinstance(reply, dict) else None
        if not isinstance(tok, str) or str(reply.get("token_type", "")).lower() != "bearer":
            raise ModelgateError("the token exchange answered without a bearer access_token",
                                 code="bad_reply", status=200)
        self._token = _config.clean_token(tok, "the exchanged token")
        exp = reply.get("expires_in")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp > 0:
            self._token_expires = time.monotonic() + max(0.0, float(exp) - 30.0)
        else:
            self._token_expires = math.inf

    def whoami(self) -> Json:
        """{"name", "roles", ...} of the token in use."""
        return self._t.call("GET", "/api/v1/whoami")  # type: ignore[no-any-return]

    # ---- models and versions -----------------------------------------------------------

    def create_model(self, model: str, description: Optional[str] = None,
                     tags: Optional[Mapping[str, str]] = None, exist_ok: bool = True) -> None:
        """POST /api/v1/models; a model that already exists is fine when exist_ok."""
        body: Json = {"name": _check_model(model)}
        if description is not None:
            body["description"] = description
        if tags is not None:
            body["tags"] = dict(tags)
        try:
            self._t.call("POST", "/api/v1/models", body, idempotent=exist_ok)
        except APIError as e:
            if not (exist_ok and e.status == 409):
                raise

    def version(self, model: str, version: int) -> Version:
        """GET a version record."""
        return Version(self._t.call(
            "GET", f"/api/v1/models/{_check_model(model)}/versions/{_check_version(version)}"))

    def versions(self, model: str, limit: int = 50, **filters: str) -> List[Version]:
        """The newest versions first; filters: tag="k:v", dataset=digest, metric="auc>=0.9"."""
        q = "&".join([f"limit={int(limit)}"] +
                     [f"{quote(k)}={quote(str(v), safe='')}" for k, v in filters.items()])
        reply = self._t.call("GET", f"/api/v1/models/{_check_model(model)}/versions?{q}")
        return [Version(v) for v in (reply or {}).get("items", [])]

    def push(self, model: str, path: Union[str, "os.PathLike[str]"], *,
             metrics: Optional[Mapping[str, float]] = None,
             params: Optional[Mapping[str, Any]] = None,
             datasets: Optional[Sequence[Mapping[str, Any]]] = None,
             tags: Optional[Mapping[str, str]] = None,
             description: Optional[str] = None,
             create_model: bool = False,
             image: Optional[str] = None,
             run_id: Optional[str] = None,
             source: Optional[Mapping[str, str]] = None,
             extra: Optional[Mapping[str, Any]] = None) -> Version:
        """Upload a directory (packed reproducibly, the CLI's bytes) or a file, and register
        it as the model's next version.

        datasets: [{"digest", "name"?, "uri"?, "role"?}]; extra: more VersionCreate fields
        (smoke, resources, io_schema, ...). The upload streams in constant memory: a
        directory is packed twice, once to compute its digest and once while sending.
        """
        _check_model(model)
        body: Json = dict(extra or {})
        if metrics is not None:
            body["metrics"] = _check_metrics(metrics)
        if params is not None:
            body["params"] = dict(params)
        if datasets is not None:
            body["datasets"] = [dict(d) for d in datasets]
        if tags is not None:
            body["tags"] = dict(tags)
        if description is not None:
            body["description"] = description
        if image is not None:
            body["image"] = image
        if run_id is not None:
            body["run_id"] = run_id
        if source is not None:
            body["source"] = dict(source)
        if create_model:
            self.create_model(model)
        blob = self.upload(path)
        body["artifact"] = blob["digest"]
        return Version(self._t.call("POST", f"/api/v1/models/{model}/versions", body,
                                    idempotent=False))

    def upload(self, path: Union[str, "os.PathLike[str]"]) -> Json:
        """Store a directory (packed like the CLI) or a file as a blob; the Blob record.

        The digest is computed first and sent as X-Content-Digest, so the server keeps
        nothing unless the bytes it received are the ones hashed here.
        """
        p = os.fspath(path)
        try:
            st = os.stat(p)
        except OSError as e:
            raise ModelgateError(f"cannot read '{p}': {e.strerror}", code="io") from None
        if stat.S_ISDIR(st.st_mode):
            digest, size, entries = _tar.digest_tree(p)

            def chunks() -> Iterable[bytes]:
                return _tar.pack(p, entries)
        elif stat.S_ISREG(st.st_mode):
            digest, size = _pull.file_digest(p)

            def chunks() -> Iterable[bytes]:
                return _file_chunks(p, size)
        else:
            raise ModelgateError(f"'{p}' is neither a file nor a directory", code="io")
        blob = self._t.upload(chunks, size, digest)
        if not isinstance(blob, dict) or blob.get("digest") != digest:
            got = blob.get("digest") if isinstance(blob, dict) else None
            raise IntegrityError(f"the server stored {got}, not {digest}; not registering "
                                 "a version", code="integrity")
        return blob

    def log_metrics(self, model: str, version: int, metrics: Mapping[str, float]) -> Version:
        """Append metrics to a version (a name already holding another value: Conflict)."""
        path = (f"/api/v1/models/{_check_model(model)}/versions/{_check_version(version)}"
                "/metrics")
        return Version(self._t.call("POST", path, {"metrics": _check_metrics(metrics)},
                                    idempotent=True, ok=(200,)))

    # ---- aliases and promotions --------------------------------------------------------

    def alias(self, model: str, alias: str) -> Json:
        return self._t.call(  # type: ignore[no-any-return]
            "GET", f"/api/v1/models/{_check_model(model)}/aliases/{_check_alias(alias)}")

    def lkg(self, model: str, alias: str) -> Json:
        """The alias's last-known-good: {"model","alias","version","artifact","image",
        "signature_url","since","generation"}. None known: Conflict/NotFound with code
        "no_known_good"."""
        return self._t.call(  # type: ignore[no-any-return]
            "GET", f"/api/v1/models/{_check_model(model)}/aliases/{_check_alias(alias)}"
            "/last-known-good")

    def promote(self, model: str, version: int, alias: str, reason: Optional[str] = None, *,
                wait: bool = False, timeout: float = 3600.0) -> Promotion:
        """Start a promotion (its gates, approvals and rollout run on the server);
        wait=True follows it to the end like `modelgate promote --wait`."""
        body: Json = {"model": _check_model(model), "version": _check_version(version),
                      "alias": _check_alias(alias)}
        if reason is not None:
            body["reason"] = reason
        p = Promotion(self, self._t.call("POST", "/api/v1/promotions", body, idempotent=False))
        return p.wait(timeout) if wait else p

    def promotion(self, promotion_id: str) -> Promotion:
        """An existing promotion, read now."""
        if not isinstance(promotion_id, str) or not PROMOTION_RE.fullmatch(promotion_id):
            raise InvalidArgument(f"'{promotion_id}' is not a promotion id",
                                  code="invalid_argument", field="id")
        return Promotion(self, self._t.call("GET", f"/api/v1/promotions/{promotion_id}"))

    def rollback(self, model: str, alias: str, reason: str) -> Json:
        return self._t.call(  # type: ignore[no-any-return]
            "POST", f"/api/v1/models/{_check_model(model)}/aliases/{_check_alias(alias)}"
            "/rollback", {"reason": reason}, idempotent=False)

    # ---- pull and verify ---------------------------------------------------------------

    def _resolve(self, model: str, version_or_alias: Union[int, str]) -> int:
        """A version number, or an alias ("production" or "@production"): the version it
        routes the most weight to (the newest on a tie), like `modelgate pull @alias`."""
        v = version_or_alias
        if isinstance(v, str) and v.isdigit():
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return _check_version(v)
        if not isinstance(v, str):
            raise InvalidArgument(f"give a version number or an alias, not {v!r}",
                                  code="invalid_argument", field="version")
        alias = _check_alias(v[1:] if v.startswith("@") else v)
        best, best_w = 0, -1
        for r in self.alias(model, alias).get("routes") or []:
            ver, w = int(r.get("version", 0)), int(r.get("weight", 0))
            if w > best_w or (w == best_w and ver > best):
                best, best_w = ver, w
        if best < 1:
            raise ModelgateError(f"alias {alias} of {model} routes to no version",
                                 code="not_found")
        return best

    def _listing(self, model: str, n: int, rec: Version) -> Optional[_pull.Listing]:
        art = rec.get("artifact") or {}
        if art.get("files") is None:
            return None
        reply = self._t.call("GET", f"/api/v1/models/{model}/versions/{n}/files")
        listing = _pull.Listing(list((reply or {}).get("items") or []))
        if len(listing.files) != art.get("files"):
            raise ModelgateError("the server's file list does not match the version's file "
                                 "count; refusing to guess", code="bad_reply")
        return listing

    def pull(self, model: str, version_or_alias: Union[int, str],
             dest: Union[str, "os.PathLike[str]"]) -> Pulled:
        """Download a version into dest (a new or empty directory), verified: the artifact
        must match the version's digest, and every file unpacked must match the digest the
        server lists for it. A single-file artifact is written as dest/artifact.

        Works in a staging directory next to dest, renamed into place only when everything
        matched; on any mismatch IntegrityError, and dest is left as it was.
        """
        _check_model(model)
        dest_s = os.path.abspath(os.fspath(dest))
        _check_target(dest_s)
        n = self._resolve(model, version_or_alias)
        rec = self.version(model, n)
        art = rec.get("artifact") or {}
        digest, size = art.get("digest"), art.get("size")
        if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest) or \
                not isinstance(size, int) or size < 0:
            raise ModelgateError("the server's version record has no valid artifact digest",
                                 code="bad_reply")
        listing = self._listing(model, n, rec)
        parent, base = os.path.split(dest_s)
        try:
            stage = tempfile.mkdtemp(prefix=f".{base}.pull-", dir=parent)
        except OSError as e:
            raise ModelgateError(f"cannot create a staging directory next to '{dest_s}': "
                                 f"{e.strerror}", code="io") from None
        try:
            _check_space(stage, size, "download the artifact")
            blob = os.path.join(stage, "blob")
            tree = os.path.join(stage, "tree")
            with open(blob, "w+b") as f:
                hexd, got = self._t.download(f"/api/v1/models/{model}/versions/{n}/artifact",
                                             f, size)
            if "sha256:" + hexd != digest or got != size:
                raise IntegrityError(
                    f"the artifact does not match its digest: got sha256:{hexd} ({got} "
                    f"bytes), the version records {digest} ({size} bytes); refusing it",
                    code="integrity")
            os.mkdir(tree, 0o755)
            if listing is None:
                os.chmod(blob, 0o644)
                os.rename(blob, os.path.join(tree, "artifact"))
                files = 1
            else:
                _check_space(stage, sum(sz for sz, _ in listing.files.values()),
                             "unpack the artifact")
                files = _pull.extract(blob, tree, listing)
            os.rename(tree, dest_s)
        except OSError as e:
            raise ModelgateError(f"cannot write the pulled model under '{parent}': "
                                 f"{e.strerror or e}", code="io") from e
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        return Pulled(model=model, version=n, path=dest_s, digest=digest, files=files)

    def verify(self, model: str, version: int, path: Union[str, "os.PathLike[str]"]) -> int:
        """Check a local copy (a pulled directory, or the artifact file) against the
        version: IntegrityError naming the first file that differs. Returns the number of
        files checked."""
        n = _check_version(version)
        rec = self.version(model, n)
        p = os.fspath(path)
        listing = self._listing(model, n, rec)
        if listing is None:
            f = os.path.join(p, "artifact") if os.path.isdir(p) else p
            digest, _ = _pull.file_digest(f)
            if digest != rec.digest:
                raise IntegrityError(f"'{f}' does not match its digest: got {digest}, the "
                                     f"version records {rec.digest}", code="integrity")
            return 1
        return _pull.verify_tree(p, listing)


def _check_target(dest: str) -> None:
    """dest must not exist, or be an empty directory (the CLI's rule)."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise ModelgateError(f"'{dest}' exists and is not a directory; choose another",
                             code="io")
    if os.listdir(dest):
        raise ModelgateError(f"'{dest}' is not empty; pull into a new directory", code="io")


def _check_space(where: str, need: int, what: str) -> None:
    """Refuse before writing need bytes where the file system has less free (plus a margin
    for blocks and metadata), as the CLI does."""
    want = need + need // 100 + (4 << 20)
    free = shutil.disk_usage(where).free
    if free < want:
        raise ModelgateError(
            f"not enough free space to {what}: it needs {need} bytes plus a margin, and "
            f"'{where}' has {free} bytes free; free some space or pull elsewhere", code="io")


def _file_chunks(path: str, size: int) -> Iterable[bytes]:
    with open(path, "rb") as f:
        left = size
        while left > 0:
            b = f.read(min(left, _tar.IO_CHUNK))
            if not b:
                raise ModelgateError(f"'{path}' shrank while it was being uploaded; try again",
                                     code="io")
            left -= len(b)
            yield b
