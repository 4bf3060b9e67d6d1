"""Flask's signed-cookie session (the CSRF secret and flash messages), built for speed.

Flask's ``SecureCookieSessionInterface`` verifies and decodes the cookie when the request
starts, whether anything reads the session or not, and builds its itsdangerous serializer
anew for every cookie it reads or writes; itsdangerous in turn derives its signing key
again for every signature. On ``GET /auth/session`` with a browser's cookies that was a
tenth of the request, for a session nobody read. Here:

- the cookie is decoded on the session's first use (``LazySession``); a request that never
  touches the session costs nothing, and its answer gets no ``Vary: Cookie``;
- one serializer per app, whose signers and derived keys are made once;
- the payload is not zlib-compressed: a CSRF secret does not shrink, and the attempt cost
  more than the signature. Cookies written compressed before still load;
- signatures are HMAC-SHA1 as before, with hashlib's own SHA-1: Flask and itsdangerous
  name it through a Python function (imported lazily), which keeps the standard library
  from OpenSSL's HMAC and makes it build one in Python, at twice the cost; and each one
  is a single call into OpenSSL (``hmac.digest``), not an HMAC object made and read;
- a session of strings (the CSRF secret) is written as plain JSON, which is what Flask's
  tagged JSON makes of it after trying each of its tags on each value; ``Vary: Cookie`` is
  added once, as text (``caching.add_vary``).

The cookie's format is itsdangerous's, unchanged: cookies signed before an upgrade verify.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from typing import Any

from flask import Flask, Request, Response, json
from flask.json.tag import TaggedJSONSerializer
from flask.sessions import SecureCookieSessionInterface, SessionMixin
from itsdangerous import BadSignature, Signer, TimestampSigner, URLSafeTimedSerializer
from itsdangerous.encoding import base64_encode
from itsdangerous.signer import HMACAlgorithm

from webapp.core.cache_headers import add_vary


class LazySession(SessionMixin):
    """The session's data, read from the cookie when first used.

    As Flask's own session: ``accessed`` once anything is read or written, ``modified``
    once anything is written (Flask then re-sends the cookie).
    """

    def __init__(self, load: Callable[[], dict[str, Any]]) -> None:
        self._load: Callable[[], dict[str, Any]] | None = load
        self._data: dict[str, Any] = {}
        self.modified = False
        self.accessed = False
        #: Values for this request only (``for_this_request``), never in the cookie.
        self._request_only: dict[str, Any] = {}

    def _read(self) -> dict[str, Any]:
        self.accessed = True
        if self._load is not None:
            self._data, self._load = self._load(), None
        return self._data

    def _write(self) -> dict[str, Any]:
        data = self._read()
        self.modified = True
        return data

    def for_this_request(self, key: str, value: Any) -> None:
        """Give ``key`` a value that this request reads and the cookie never keeps (nor
        reads it for): Flask-Login's ``_fresh``, worked out from the database session."""
        self._request_only[key] = value

    def __getitem__(self, key: str) -> Any:
        if key in self._request_only:
            return self._request_only[key]
        return self._read()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._write()[key] = value

    def __delitem__(self, key: str) -> None:
        if key in self._request_only:
            del self._request_only[key]
        else:
            del self._write()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __contains__(self, key: object) -> bool:
        return key in self._request_only or key in self._read()

    def clear(self) -> None:
        self._write().clear()


class _OneCallHMAC(HMACAlgorithm):
    """itsdangerous's HMAC, computed in one call (the same signature)."""

    def get_signature(self, key: bytes, value: bytes) -> bytes:
        return hmac.digest(key, value, self.digest_method)


class _OnceDerivedSigner(TimestampSigner):
    """The timed serializer's signer, deriving its key from the secret once, not for every
    signature."""

    default_digest_method = staticmethod(hashlib.sha1)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if type(self.algorithm) is HMACAlgorithm:
            self.algorithm = _OneCallHMAC(self.digest_method)

    def derive_key(self, secret_key: str | bytes | None = None) -> bytes:
        derived: dict[str | bytes | None, bytes] = self.__dict__.setdefault("_derived", {})
        key = derived.get(secret_key)
        if key is None:
            key = derived[secret_key] = super().derive_key(secret_key)
        return key


class KeyedOnceSerializer(URLSafeTimedSerializer):
    """itsdangerous's URL-safe timed serializer with its signers made once per salt, and
    no compression. Its output verifies with a plain ``URLSafeTimedSerializer`` of the same
    keys and salt (Flask-WTF checks the CSRF tokens ``webapp.extensions`` mints with one)."""

    default_signer = _OnceDerivedSigner

    def make_signer(self, salt: str | bytes | None = None) -> Signer:
        signers: dict[str | bytes | None, Signer] = self.__dict__.setdefault("_signers", {})
        made = signers.get(salt)
        if made is None:
            made = signers[salt] = super().make_signer(salt)
        return made

    def dump_payload(self, obj: Any) -> bytes:
        # URLSafeSerializerMixin's, minus the zlib attempt; its load_payload reads both.
        return base64_encode(self.serializer.dumps(obj).encode())


class SessionJSON(TaggedJSONSerializer):
    """Flask's tagged JSON for the session, which skips tagging where no value needs a tag."""

    def dumps(self, value: Any) -> str:
        if (
            type(value) is dict
            and all(type(item) is str for item in value.values())
            # A dict of one key named as a tag is itself tagged (Flask's TagDict).
            and not (len(value) == 1 and next(iter(value)) in self.tags)
        ):
            return json.dumps(value, separators=(",", ":"))
        return super().dumps(value)


class CookieSessionInterface(SecureCookieSessionInterface):
    digest_method = staticmethod(hashlib.sha1)
    serializer = SessionJSON()

    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer | None:
        serializer: URLSafeTimedSerializer | None = app.extensions.get("webapp.session_serializer")
        if serializer is None and app.secret_key:
            keys: list[str | bytes] = [*app.config["SECRET_KEY_FALLBACKS"], app.secret_key]
            serializer = app.extensions["webapp.session_serializer"] = KeyedOnceSerializer(
                keys,  # type: ignore[arg-type]  # itsdangerous: current key last
                salt=self.salt,
                serializer=self.serializer,
                signer_kwargs={
                    "key_derivation": self.key_derivation,
                    "digest_method": self.digest_method,
                },
            )
        return serializer

    # Flask types the cookie session as its dict-based SecureCookieSession; any SessionMixin
    # serves.
    def open_session(self, app: Flask, request: Request) -> LazySession | None:  # type: ignore[override]
        serializer = self.get_signing_serializer(app)
        if serializer is None:
            return None
        cookie = request.cookies.get(self.get_cookie_name(app))
        max_age = int(app.permanent_session_lifetime.total_seconds())

        def load() -> dict[str, Any]:
            if not cookie:
                return {}
            try:
                data: dict[str, Any] = serializer.loads(cookie, max_age=max_age)
                return data
            except BadSignature:
                return {}

        return LazySession(load)

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Flask's, but nothing at all for a session nobody used, and ``Vary: Cookie`` added
        once as text."""
        if not session.accessed:
            # Nothing read it and nothing wrote it: the cookie stays as the browser has it.
            return
        add_vary(response, "Cookie")
        if not session and not session.modified:
            return
        name = self.get_cookie_name(app)
        attributes: dict[str, Any] = {
            "domain": self.get_cookie_domain(app),
            "path": self.get_cookie_path(app),
            "secure": self.get_cookie_secure(app),
            "partitioned": self.get_cookie_partitioned(app),
            "samesite": self.get_cookie_samesite(app),
            "httponly": self.get_cookie_httponly(app),
        }
        if not session:  # emptied: the browser forgets it
            response.delete_cookie(name, **attributes)
        elif self.should_set_cookie(app, session):
            value = self.get_signing_serializer(app).dumps(dict(session))  # type: ignore[union-attr]
            expires = self.get_expiration_time(app, session)
            response.set_cookie(name, value, expires=expires, **attributes)
