"""HTTP for the client: JSON calls, a streamed blob upload and a streamed, hashed download.

Like the CLI (client/http.c): only http and https, redirects never followed with the token
(an artifact download's 307 to a presigned object-store URL is fetched without it), JSON
replies capped at 64 MiB, a transfer that moves no byte for 300 s aborted.

Retries (the CLI's polling rule, applied to every call that is safe to repeat): no answer,
or 500/502/503/504, is retried with backoff (0.25 s growing to 5 s, Retry-After honoured,
at most `retries` times). Safe to repeat are GET/HEAD/PUT/DELETE, blob uploads (content
addressed: the same bytes give the same blob) and metric appends (the same values again
are a no-op). Any other POST (a version, a model, a promotion, an approval, the token
exchange) is retried only when it certainly never reached the server: the connection
could not be opened, or a kept-alive connection was found closed before the request went
out. Such a call takes a new connection when the kept one has idled, so that a server's
idle timeout closing it just then does not leave the outcome unknown.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import random
import socket
import threading
import time
from typing import Any, BinaryIO, Callable, Dict, Iterable, Mapping, Optional, Tuple
from urllib.parse import urlencode, urlsplit

from ._errors import IntegrityError, ModelgateError, TransportError, api_error

JSON_MAX = 64 << 20
ERROR_MAX = 64 << 10
IO_CHUNK = 1 << 20
USER_AGENT = "modelgate-python/0.1"
TRANSIENT_STATUS = (500, 502, 503, 504)
EXPECT_WAIT_S = 1.0  # how long an upload waits for "100 Continue" (curl's default)
IDLE_FRESH_S = 2.0  # a non-idempotent call opens a new connection after this much idling


class _NotSent(Exception):
    """The request certainly did not reach the server (wraps the cause)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Reply:
    """A response read whole (JSON or error bodies)."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class Transport:
    """One server, one bearer token, one kept-alive connection (guarded by a lock)."""

    def __init__(self, url: str, token_source: Callable[[], str], timeout: float,
                 retries: int) -> None:
        parts = urlsplit(url)
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self._token_source = token_source
        self._conn: Optional[http.client.HTTPConnection] = None
        self._used = False  # the connection served a request before (kept alive)
        self._last_used = 0.0
        self._lock = threading.RLock()

    # ---- connections -------------------------------------------------------------------

    def _new_conn(self, scheme: str, host: str,
                  port: Optional[int]) -> http.client.HTTPConnection:
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.timeout)
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        """The kept-alive connection, connected; _NotSent when it cannot be opened.

        fresh: a request that must not be repeated gets a new connection when the kept one
        idled, since a server may close an idle connection just as the request goes out,
        and then nobody can tell whether it arrived.
        """
        if fresh and self._conn is not None and self._used and \
                time.monotonic() - self._last_used > IDLE_FRESH_S:
            self.close()
        if self._conn is None:
            self._conn = self._new_conn(self.scheme, self.host, self.port)
            self._used = False
        if self._conn.sock is None:
            try:
                self._conn.connect()
            except OSError as e:
                self.close()
                raise _NotSent(e) from e
            self._used = False
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except OSError:
                    pass
            self._conn = None

    def _headers(self, extra: Optional[Mapping[str, str]], auth: bool) -> Dict[str, str]:
        h = {"User-Agent": USER_AGENT}
        if auth:
            h["Authorization"] = "Bearer " + self._token_source()
        if extra:
            h.update(extra)
        return h

    # ---- one exchange ------------------------------------------------------------------

    def _exchange(self, method: str, path: str, headers: Dict[str, str],
                  body: Optional[bytes], chunks: Optional[Iterable[bytes]],
                  body_cap: int, fresh: bool = False
                  ) -> Tuple[http.client.HTTPResponse, Optional[Reply]]:
        """Send one request. Returns (response, Reply read whole unless body_cap == 0).

        Raises _NotSent when the request never went out, TransportError otherwise.
        """
        conn = self._connection(fresh)
        reused = self._used
        sent_any = False
        try:
            conn.putrequest(method, self.base + path, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            try:
                conn.endheaders(body)
            except (BrokenPipeError, ConnectionResetError) as e:
                # a kept-alive connection the server closed while idle
                self.close()
                if reused:
                    raise _NotSent(e) from e
                raise
            sent_any = True
            if chunks is not None:
                early = _await_continue(conn)
                if early is not None:
                    # refused before the body (401, 403, 413, ...): read that answer, and
                    # drop the connection, which still expects the body
                    resp = http.client.HTTPResponse(
                        _PrefixedSocket(conn.sock, early), method=method)  # type: ignore
                    resp.begin()
                    data = _read_capped(resp, ERROR_MAX)
                    self.close()
                    return resp, Reply(resp.status, resp.headers, data)
                try:
                    for c in chunks:
                        conn.send(c)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server may have answered early anyway: read it below
            try:
                resp = conn.getresponse()
            except http.client.RemoteDisconnected as e:
                self.close()
                if reused and chunks is None and body is None:
                    raise _NotSent(e) from e
                raise
            self._used = True
            self._last_used = time.monotonic()
            if body_cap == 0:
                return resp, None
            data = _read_capped(resp, body_cap + 1)
            if len(data) > body_cap:
                self.close()
                raise ModelgateError(
                    f"the server's reply is larger than {body_cap} bytes; refusing it",
                    code="bad_reply", status=resp.status)
            if resp.will_close:
                self.close()
            return resp, Reply(resp.status, resp.headers, data)
        except _NotSent:
            raise
        except ModelgateError:
            raise
        except (OSError, http.client.HTTPException) as e:
            self.close()
            what = "no answer" if sent_any else "cannot send"
            raise TransportError(f"{what} from {self.url}: {e or type(e).__name__}",
                                 code="transport") from e

    # ---- retries -----------------------------------------------------------------------

    def _backoff(self, attempt: int, reply: Optional[Reply]) -> None:
        delay = min(5.0, 0.25 * (1.5 ** attempt)) * (0.75 + random.random() / 2)
        if reply is not None:
            ra = reply.headers.get("Retry-After")
            if ra and ra.strip().isdigit():
                delay = min(30.0, float(ra.strip()))
        time.sleep(delay)

    def call(self, method: str, path: str, body: Any = None, *, idempotent: Optional[bool] = None,
             auth: bool = True, form: Optional[Mapping[str, str]] = None,
             ok: Tuple[int, ...] = (200, 201, 204)) -> Any:
        """A JSON call that must succeed; returns the parsed body (None for 204).

        Raises the APIError subclass for the status, TransportError without an answer.
        """
        if idempotent is None:
            idempotent = method in ("GET", "HEAD", "PUT", "DELETE")
        headers: Dict[str, str] = {"Accept": "application/json"}
        data: Optional[bytes] = None
        if form is not None:
            data = urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        if data is not None or method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(data or b""))
        attempt = 0
        while True:
            reply: Optional[Reply] = None
            err: Optional[BaseException] = None
            with self._lock:
                try:
                    _, reply = self._exchange(method, path, self._headers(headers, auth), data,
                                              None, JSON_MAX, fresh=not idempotent)
                except _NotSent as e:
                    err = e.cause
                    retry = True
                except TransportError as e:
                    err = e
                    retry = idempotent
            if reply is not None:
                if reply.status in ok:
                    return self._parse_ok(reply)
                retry = idempotent and reply.status in TRANSIENT_STATUS
                if not retry or attempt >= self.retries:
                    raise api_error(reply.status, reply.json())
            elif not retry or attempt >= self.retries:
                if isinstance(err, ModelgateError):
                    raise err
                raise TransportError(f"cannot reach {self.url}: {err}", code="transport")
            self._backoff(attempt, reply)
            attempt += 1

    @staticmethod
    def _parse_ok(reply: Reply) -> Any:
        if reply.status == 204 or not reply.body:
            return None
        v = reply.json()
        if v is None:
            # A release tool never fails open: a success we cannot read is an error.
            raise ModelgateError(
                f"the server's reply (HTTP {reply.status}) is not JSON this client can read; "
                "refusing to guess", code="bad_reply", status=reply.status)
        return v

    # ---- blobs -------------------------------------------------------------------------

    def upload(self, chunks: Callable[[], Iterable[bytes]], size: int, digest: str) -> Any:
        """POST /api/v1/blobs streaming chunks() (called again on each retry), with
        X-Content-Digest. Content addressed, so always safe to retry."""
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Length": str(size),
            "X-Content-Digest": digest,
            "Expect": "100-continue",
            "Accept": "application/json",
        }
        attempt = 0
        while True:
            reply: Optional[Reply] = None
            err: Optional[BaseException] = None
            with self._lock:
                try:
                    _, reply = self._exchange("POST", "/api/v1/blobs",
                                              self._headers(headers, True), None, chunks(),
                                              JSON_MAX)
                except _NotSent as e:
                    err = e.cause
                except TransportError as e:
                    err = e
                except BaseException:
                    self.close()  # a half-sent body: this connection is done
                    raise
            if reply is not None:
                if reply.status in (200, 201):
                    return self._parse_ok(reply)
                if reply.status not in TRANSIENT_STATUS or attempt >= self.retries:
                    raise api_error(reply.status, reply.json())
            elif attempt >= self.retries:
                if isinstance(err, ModelgateError):
                    raise err
                raise TransportError(f"cannot reach {self.url}: {err}", code="transport")
            self._backoff(attempt, reply)
            attempt += 1

    def download(self, path: str, out: BinaryIO, max_bytes: int) -> Tuple[str, int]:
        """GET path into out (from its start) while hashing; (sha256 hex, size).

        More than max_bytes is refused. A 307/302/303 to an http(s) URL is followed once,
        without the token. Retried from the start on a transient failure.
        """
        attempt = 0
        while True:
            reply: Optional[Reply] = None
            err: Optional[BaseException] = None
            out.seek(0)
            out.truncate()
            with self._lock:
                try:
                    return self._download_once(path, out, max_bytes)
                except _NotSent as e:
                    err = e.cause
                except TransportError as e:
                    err = e
                except _ErrorReply as e:
                    reply = e.reply
            if reply is not None:
                if reply.status not in TRANSIENT_STATUS or attempt >= self.retries:
                    raise api_error(reply.status, reply.json())
            elif attempt >= self.retries:
                if isinstance(err, ModelgateError):
                    raise err
                raise TransportError(f"cannot reach {self.url}: {err}", code="transport")
            self._backoff(attempt, reply)
            attempt += 1

    def _download_once(self, path: str, out: BinaryIO, max_bytes: int) -> Tuple[str, int]:
        resp, _ = self._exchange("GET", path, self._headers(None, True), None, None, 0)
        other: Optional[http.client.HTTPConnection] = None
        try:
            if resp.status in (302, 303, 307) and resp.getheader("Location", "").startswith(
                    ("http://", "https://")):
                loc = urlsplit(resp.getheader("Location", ""))
                _read_capped(resp, ERROR_MAX)
                if resp.will_close:
                    self.close()
                other = self._new_conn(loc.scheme, loc.hostname or "", loc.port)
                target = loc.path + ("?" + loc.query if loc.query else "")
                try:
                    other.request("GET", target, headers={"User-Agent": USER_AGENT})
                    resp = other.getresponse()
                except (OSError, http.client.HTTPException) as e:
                    raise TransportError(f"no answer from the object store: {e}",
                                         code="transport") from e
            if not 200 <= resp.status < 300:
                body = _read_capped(resp, ERROR_MAX)
                if resp.will_close and other is None:
                    self.close()
                raise _ErrorReply(Reply(resp.status, resp.headers, body))
            h = hashlib.sha256()
            got = 0
            while True:
                try:
                    b = resp.read(IO_CHUNK)
                except (OSError, http.client.HTTPException) as e:
                    self.close()
                    raise TransportError(f"the download broke off: {e}",
                                         code="transport") from e
                if not b:
                    break
                got += len(b)
                if got > max_bytes:
                    self.close()
                    raise IntegrityError(
                        f"the server sent more than the {max_bytes} bytes expected; "
                        "refusing it", code="integrity")
                h.update(b)
                try:
                    out.write(b)
                except OSError as e:
                    self.close()
                    raise ModelgateError(f"cannot write the download: {e.strerror}",
                                         code="io") from e
            if resp.will_close and other is None:
                self.close()
            return h.hexdigest(), got
        finally:
            if other is not None:
                other.close()


def _await_continue(conn: http.client.HTTPConnection) -> Optional[bytes]:
    """After an upload's headers went out with "Expect: 100-continue": None to send the
    body (the server said 100 Continue, or said nothing within EXPECT_WAIT_S), or the
    status line of the final answer it gave instead (a refusal before the body, which a
    server closing the connection mid-body could otherwise lose)."""
    sock = conn.sock
    old = sock.gettimeout()
    sock.settimeout(EXPECT_WAIT_S)
    raw = sock.makefile("rb", buffering=0)  # unbuffered: reads exactly what it returns
    try:
        try:
            line = raw.readline(1024)
        except socket.timeout:
            return None
        if not line:
            raise http.client.RemoteDisconnected("closed before the upload's body")
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[1] != b"100":
            return line
        sock.settimeout(old)
        while raw.readline(65536) not in (b"\r\n", b"\n", b""):
            pass
        return None
    finally:
        raw.close()
        sock.settimeout(old)


class _PrefixedRaw(io.RawIOBase):
    """A socket's bytes with some already read put back in front."""

    def __init__(self, prefix: bytes, raw: Any) -> None:
        self._prefix = prefix
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._prefix:
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return int(self._raw.readinto(b) or 0)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _PrefixedSocket:
    """What http.client.HTTPResponse needs of a socket (makefile), with a prefix."""

    def __init__(self, sock: Any, prefix: bytes) -> None:
        self._sock = sock
        self._prefix = prefix

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_PrefixedRaw(self._prefix, self._sock.makefile("rb",
                                                                                buffering=0)))


def _read_capped(resp: http.client.HTTPResponse, cap: int) -> bytes:
    """At most cap bytes of the body, read in small steps (Python 3.9's read(n) allocates
    n bytes up front, whatever the body's length)."""
    parts = []
    left = cap
    while left > 0:
        b = resp.read(min(left, 1 << 16))
        if not b:
            break
        parts.append(b)
        left -= len(b)
    return b"".join(parts)


class _ErrorReply(Exception):
    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply
