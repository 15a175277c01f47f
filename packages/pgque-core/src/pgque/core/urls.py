"""URL handling shared by ``connect()`` and the backends: parsing options and masking secrets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from pgque.core.errors import ConfigurationError

__all__ = ["ParsedUrl", "parse_url", "mask_url", "mask_dsn", "url_password"]

_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedUrl:
    """A queue URL split into its scheme, location and query options."""

    scheme: str
    netloc_and_path: str
    options: dict[str, str]


def parse_url(url: str) -> ParsedUrl:
    """Split *url*; raises ConfigurationError if it has no scheme or repeats an option."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(f"not a queue URL (expected scheme://...): {mask_url(str(url))}")
    parts = urlsplit(url)
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in options:
            raise ConfigurationError(f"option {key!r} is given twice in {mask_url(url)}")
        options[key] = value
    return ParsedUrl(parts.scheme.lower(), (parts.netloc + parts.path).strip("/"), options)


def mask_url(url: str) -> str:
    """Return *url* with any password replaced by ``***`` (safe for logs and errors)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    secret_keys = {"password", "sslpassword"}
    # An option whose value is a URL (listen_url=) may carry a password of its own.
    shown = [
        (k, "***" if k.lower() in secret_keys else mask_url(v) if "://" in v else v)
        for k, v in pairs
    ]
    if netloc == parts.netloc and all(a[1] == b[1] for a, b in zip(pairs, shown, strict=True)):
        # Nothing to hide: keep the URL as written (urlunsplit would drop an empty "//").
        return url
    query = "&".join(f"{k}={v}" for k, v in shown)
    # Rebuild by hand: urlunsplit drops the "//" of a URL with an empty host (unix:///path).
    masked = f"{parts.scheme}://{netloc}{parts.path}"
    if query:
        masked += f"?{query}"
    if parts.fragment:
        masked += f"#{parts.fragment}"
    return masked


def mask_dsn(dsn: str) -> str:
    """Return *dsn* (a URL, or libpq's ``key=value`` form) with any password replaced by
    ``***``."""
    if "://" in dsn:
        return mask_url(dsn)
    return _KV_PASSWORD.sub(r"\1***", dsn)


def url_password(dsn: str) -> str | None:
    """Return the password written in a URL *dsn* (decoded), to scrub it from error messages;
    None when there is none, or *dsn* is no URL."""
    if "://" not in dsn:
        return None
    try:
        password = urlsplit(dsn).password
    except ValueError:
        return None
    return unquote(password) if password else None
