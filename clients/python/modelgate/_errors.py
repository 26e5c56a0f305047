"""Exceptions: every failure is a ModelgateError; server refusals carry the API's error body."""

from __future__ import annotations

from typing import Any, Dict, Optional


class ModelgateError(Exception):
    """Any failure of this client.

    code: the API's error code ("invalid_argument", "forbidden", "conflict", ...) for a
    server refusal, or a client-side code ("transport", "integrity", "pack", "config",
    "timeout", "promotion_failed", "bad_reply"); field: the JSON path the server named, if
    any; message: one sentence; status: the HTTP status (0 when none arrived).
    """

    def __init__(self, message: str, code: str = "error", field: Optional[str] = None,
                 status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        http = f"HTTP {self.status} " if self.status else ""
        return f"{self.message}{where} [{http}{self.code}]"


class APIError(ModelgateError):
    """The server answered with an error status and (usually) an API error body."""


class InvalidArgument(APIError):
    """400: invalid_argument, digest_mismatch, invalid_grant."""


class Unauthenticated(APIError):
    """401: no valid token."""


class Forbidden(APIError):
    """403: forbidden, self_approval."""


class NotFound(APIError):
    """404: not_found, no_known_good (some), or a route this server does not have."""


class Gone(APIError):
    """410: the version was deleted, or its bytes released."""


class Conflict(APIError):
    """409: conflict, alias_protected, promotion_in_progress, no_known_good."""


class PayloadTooLarge(APIError):
    """413: over the server's size limit."""


class QuotaExceeded(APIError):
    """507: quota_exceeded."""


class ServerError(APIError):
    """5xx: internal, unavailable."""


class TransportError(ModelgateError):
    """No answer: the server could not be reached, or the connection broke."""


class IntegrityError(ModelgateError):
    """What was received does not match its digest (a tampered or corrupted artifact)."""


class PackError(ModelgateError):
    """The directory cannot be packed (a link, a special file, a file changing meanwhile)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="pack")


class ConfigError(ModelgateError):
    """No server or token configured, or the config file is unreadable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="config")


class WaitTimeout(ModelgateError):
    """Gave up waiting (a promotion still running at the deadline)."""

    def __init__(self, message: str, last: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message, code="timeout")
        self.last = last


class PromotionFailed(ModelgateError):
    """A promotion ended rejected, aborted or rolled back; .promotion is its last state."""

    def __init__(self, message: str, promotion: Dict[str, Any]) -> None:
        super().__init__(message, code="promotion_failed")
        self.promotion = promotion


_BY_STATUS = {
    400: InvalidArgument,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    507: QuotaExceeded,
}


def api_error(status: int, body: Any) -> APIError:
    """The exception for an error reply: modelgate's {"error":{code,message,field}}, or
    RFC 6749's {"error":"invalid_grant","error_description":...} (token exchange)."""
    code, message, field = "", "", None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = str(err.get("code") or "")
        message = str(err.get("message") or "")
        f = err.get("field")
        field = str(f) if isinstance(f, str) and f else None
    elif isinstance(err, str):
        code = err
        desc = body.get("error_description") if isinstance(body, dict) else None
        message = str(desc or "")
    if not code:
        code = "http_%d" % status
    if not message:
        message = f"the server answered HTTP {status}"
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    return cls(message, code=code, field=field, status=status)
