"""Where the client finds its server and token: the CLI's rules (client/config.c).

Order: the arguments given to Client(), then $MODELGATE_URL / $MODELGATE_TOKEN, then
$MODELGATE_OIDC_TOKEN (a CI identity token, exchanged for a short-lived modelgate token,
API.md "Trusted publishing"), then the CLI's config file
$XDG_CONFIG_HOME/modelgate/config.json (else ~/.config/modelgate/config.json), written by
`modelgate login`: {"url": "...", "token": "..."}, whose token is used only for the URL
saved with it.
"""

from __future__ import annotations

import json
import os
import stat
import warnings
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from ._errors import ConfigError

CONFIG_MAX = 64 << 10
TOKEN_MAX = 4096


@dataclass
class Settings:
    url: str
    token: Optional[str]  # None while an OIDC token waits to be exchanged
    oidc_token: Optional[str]
    oidc_from_env: bool = False  # re-read $MODELGATE_OIDC_TOKEN for a later exchange


def config_path() -> Optional[str]:
    """The CLI's config file path, or None when neither XDG_CONFIG_HOME nor HOME is set."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "modelgate", "config.json")
    home = os.environ.get("HOME", "")
    if home:
        return os.path.join(home, ".config", "modelgate", "config.json")
    return None


def clean_url(url: str) -> str:
    """mgc_url_clean: http(s) only, no spaces, query or fragment; no trailing '/'."""
    if not (url.startswith("http://") or url.startswith("https://")):
        raise ConfigError(f"the server URL must start with http:// or https://, not '{url}'")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F or c in "?#" for c in url):
        raise ConfigError("the server URL must not hold spaces, control characters, '?' or '#'")
    url = url.rstrip("/")
    if not urlsplit(url).hostname:
        raise ConfigError(f"the server URL names no host: '{url}'")
    return url


def clean_token(token: str, what: str) -> str:
    """Trim surrounding whitespace; refuse empty, over-long or space-holding tokens."""
    t = token.strip(" \t\r\n")
    if not t or len(t) > TOKEN_MAX or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in t):
        raise ConfigError(f"{what} is empty or holds spaces or control characters")
    return t


def _read_config_file(path: str) -> dict:  # type: ignore[type-arg]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"cannot read '{path}': {e.strerror}") from None
    if stat.S_IMODE(st.st_mode) & 0o077:
        warnings.warn(f"'{path}' is readable by others; chmod 600 it", stacklevel=4)
    try:
        with open(path, "rb") as f:
            text = f.read(CONFIG_MAX + 1)
    except OSError as e:
        raise ConfigError(f"cannot read '{path}': {e.strerror}") from None
    if len(text) > CONFIG_MAX:
        raise ConfigError(f"'{path}' is larger than {CONFIG_MAX} bytes")
    try:
        cfg = json.loads(text)
    except ValueError:
        cfg = None
    if not isinstance(cfg, dict):
        raise ConfigError(f"'{path}' is not a JSON object; run `modelgate login` again")
    return cfg


def resolve(url: Optional[str], token: Optional[str], oidc_token: Optional[str]) -> Settings:
    """The server and credentials to use, by the order in the module's docstring."""
    url = url or os.environ.get("MODELGATE_URL") or None
    token = token or os.environ.get("MODELGATE_TOKEN") or None
    oidc = oidc_token or os.environ.get("MODELGATE_OIDC_TOKEN") or None
    oidc_from_env = not oidc_token and oidc is not None
    cfg_token_for: Optional[str] = None  # the URL a saved token is for, when not this one
    if url is None or (token is None and oidc is None):
        path = config_path()
        cfg = _read_config_file(path) if path else {}
        cfg_url = cfg.get("url") if isinstance(cfg.get("url"), str) else None
        if url is None:
            url = cfg_url
        # The saved token goes only to the server it was saved for (the CLI would send it
        # to MODELGATE_URL whatever that names).
        if token is None and oidc is None and isinstance(cfg.get("token"), str) and \
                cfg_url is not None and url is not None and \
                clean_url(cfg_url) == clean_url(url):
            token = cfg["token"]
        elif token is None and oidc is None and isinstance(cfg.get("token"), str):
            cfg_token_for = cfg_url
    if url is None:
        raise ConfigError("no server configured: pass Client(url=...), set MODELGATE_URL, or "
                          "run `modelgate login --url URL --token-file FILE`")
    if token is None and oidc is None and url is not None and cfg_token_for is not None:
        raise ConfigError(f"no token for {url}: the saved token is for {cfg_token_for}; pass "
                          "Client(token=...) or set MODELGATE_TOKEN")
    if token is None and oidc is None:
        raise ConfigError("no token: pass Client(token=...), set MODELGATE_TOKEN (or "
                          "MODELGATE_OIDC_TOKEN in CI), or run `modelgate login`")
    return Settings(
        url=clean_url(url),
        token=clean_token(token, "the token") if token is not None else None,
        oidc_token=clean_token(oidc, "the OIDC token") if oidc is not None else None,
        oidc_from_env=oidc_from_env and token is None,
    )
