"""A Redis URL's secrets: masked before anything logs or prints the URL.

The rule does not depend on how a parser reads the URL: everything between ``://`` and
the *last* ``@`` is credentials, whatever characters it holds (an unencoded ``#``, ``/``
or ``?`` in a password makes ``urllib`` read part of it as the port, the path or the
fragment, and then print it in its error messages). redis-py's own parser
(``redis.connection.parse_url``, the one the client uses) is then asked what it would
connect with: when its password or user name is not exactly what the URL's
credentials say, the URL cannot work, and ``check_url`` refuses it with a masked
message rather than connect somewhere else with a piece of the password.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlencode

from scrapy_rep.policy.config import SettingError

if TYPE_CHECKING:
    import redis

#: Per-call socket timeout: a store call waits at most this long for Redis.
CALL_TIMEOUT = 1.0

_SECRET_PARAMS = {"password", "pass", "passwd", "token", "username", "user"}
_MASK = "***"
# A credential in the query runs to the next "&" whatever it holds ("@", "#", "/"):
# masked in the raw text, before the "@" rule below could misread it.
_SECRET_NAMES = "|".join(sorted(_SECRET_PARAMS))
_SECRET_QUERY = re.compile(rf"([?&](?:{_SECRET_NAMES})=)([^&]*)", re.IGNORECASE)


def _split(url: str) -> tuple[str, str, str] | None:
    """(scheme, credentials, rest) with the credentials cut at the last "@"."""
    scheme, sep, after = url.partition("://")
    if not sep:
        return None
    userinfo, at, rest = after.rpartition("@")
    return scheme, userinfo if at else "", rest if at else after


def mask_url(url: str) -> str:
    """``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``.

    Query parameters that carry credentials are masked, a fragment is dropped, and a
    user name that holds a reserved character is masked with the password."""
    parts = _split(_SECRET_QUERY.sub(rf"\1{_MASK}", url))
    if parts is None:
        return "<unparsable redis URL>"
    scheme, userinfo, rest = parts
    rest = rest.partition("#")[0]
    location, _, query = rest.partition("?")
    masked = f"{scheme}://"
    if userinfo:
        user, has_password, _ = userinfo.partition(":")
        # A lone userinfo (redis://secret@host) is a password for some clients.
        plain_user = has_password and not any(c in user for c in "/?#[]")
        masked += f"{user}:{_MASK}@" if plain_user else f"{_MASK}@"
    masked += location
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        masked += "?" + urlencode(
            [(k, _MASK if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*/"
        )
    return masked


def secrets_of(url: str) -> list[str]:
    """Every string that may be (part of) a credential in ``url``, longest first, to
    scrub from any text that may echo it (driver error messages)."""
    found: set[str] = {m.group(2) for m in _SECRET_QUERY.finditer(url)}
    parts = _split(_SECRET_QUERY.sub("", url))
    if parts is not None:
        _, userinfo, rest = parts
        if userinfo:
            found.add(userinfo)
            found.update(userinfo.split(":"))
            found.update(unquote(piece) for piece in userinfo.split(":"))
            for mark in "#/?":  # what urllib may have cut a password into
                found.update(userinfo.replace(":", mark).split(mark))
        for key, value in parse_qsl(rest.partition("#")[0].partition("?")[2]):
            if key.lower() in _SECRET_PARAMS:
                found.add(value)
        fragment = rest.partition("#")[2]
        if fragment:
            found.add(fragment)
    return sorted((s for s in found if len(s) >= 2), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, _MASK)
    return text


def check_url(url: str) -> str | None:
    """Why redis-py would not connect with what the URL says (None when it would).

    The answer never quotes the URL or the parser's message (which may hold a piece
    of the password)."""
    from redis.connection import parse_url  # the parser the client itself uses

    parts = _split(url)
    if parts is None:
        return "not a URL (expected redis://, rediss:// or unix://)"
    _, userinfo, rest = parts
    hint = (
        "percent-encode reserved characters in the user name and password "
        "(urllib.parse.quote(password, safe=''))"
    )
    if "#" in rest:
        return f"the URL holds a '#' after its credentials; {hint}"
    try:
        parsed: dict[str, object] = parse_url(url)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError):
        return f"redis-py cannot parse it (a bad port or database number?); or {hint}"
    user, has_password, password = userinfo.partition(":")
    expected_password = unquote(password) if has_password else None
    expected_user = unquote(user) if userinfo and (user or not has_password) else None
    if userinfo and not has_password:
        expected_user = unquote(userinfo)
    if parsed.get("password") != expected_password and "password" not in rest:
        return f"redis-py reads another password from it; {hint}"
    if (parsed.get("username") or None) != (expected_user or None) and "username" not in rest:
        return f"redis-py reads another user name from it; {hint}"
    return None


def open_client(url: str) -> redis.Redis:
    """A redis-py client for ``url``, or a ``SettingError`` that never shows a secret."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise SettingError(
            "REP_STORAGE = a redis URL requires the redis package: pip install scrapy-rep[redis]"
        ) from None
    problem = check_url(url)
    if problem is not None:
        raise SettingError(f"REP_STORAGE: bad redis URL {mask_url(url)}: {problem}")
    try:
        return redis.Redis.from_url(
            url,
            socket_timeout=CALL_TIMEOUT,
            socket_connect_timeout=CALL_TIMEOUT,
            # No client-side retries with backoff: the store has its own retry-once
            # and outage fallback, and a caller must not wait long.
            retry=Retry(NoBackoff(), 0),
        )
    except (ValueError, TypeError) as exc:
        message = scrub(str(exc), secrets_of(url))
        raise SettingError(f"REP_STORAGE: bad redis URL {mask_url(url)}: {message}") from None
