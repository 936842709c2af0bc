"""SigV4 signatures of the fast path's requests, as botocore's ``SigV4Auth`` makes them, made once per kind.

botocore's signer rebuilds everything for every request: the signing key (four HMACs over the secret key,
the day, the region and the service), the map of the headers to sign, the canonical request from the
URL, the sorted headers and the body's hash, the string to sign, and the ``Authorization`` header. Of
all that, two inputs change between a client's requests: the time (``X-Amz-Date``) and the body. So
:class:`Signer` lets botocore's ``SigV4Auth`` sign the first request of each kind (same method, URL,
headers, credentials, region, service and day) and keeps what it made, its canonical request cut around
the two places those inputs take, and signs the next requests of that kind by putting their time and body
hash there and computing what follows them exactly as ``SigV4Auth`` does: the string to sign, its HMAC with
the day's signing key (botocore's ``_sign``), the ``Authorization`` header.

A kind is kept only after checking, on botocore's own result, that its canonical request, string to sign
and ``Authorization`` header have the form SigV4 gives them (the time in ``x-amz-date`` only, the body's
SHA-256 as the last line); a request of any other form is signed by botocore every time. Tests sign the
same requests both ways, across days, credentials, headers and bodies.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from typing import Any

from botocore import auth
from botocore.auth import SIGNED_HEADERS_BLACKLIST, SIGV4_TIMESTAMP, SigV4Auth
from botocore.exceptions import NoCredentialsError, NoRegionError

__all__ = ["Signer", "remember", "signed_host"]

# Bounded memos of what does not change between requests (kinds of request, signing keys, paths).
_MEMO_LIMIT = 256
_SIGNED = "mme_triton.headers_to_sign"  # where one signing keeps its map of the headers to sign
_MADE = "mme_triton.signed"  # where botocore's canonical request and string to sign are kept
_CANONICAL_PATHS: dict[str, str] = {}
# botocore's clock, read through its module as SigV4Auth reads it (botocore's stubs leave it out)
_AUTH: Any = auth


def remember(memo: dict[Any, Any], key: Any, value: Any) -> Any:
    """``memo[key] = value``, the memo emptied first when it is full; returns ``value``."""
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[key] = value
    return value


@functools.lru_cache(maxsize=64)
def signed_host(url: str) -> str:
    """The ``Host`` botocore's signer signs for ``url`` (and so the one to send)."""
    host: str = auth._host_from_url(url)  # type: ignore[attr-defined]
    return host


class _HeadersToSign(dict[str, str]):
    """The headers to sign as a dict: what ``SigV4Auth`` reads of botocore's map (``get_all``, iteration,
    membership) for a request whose header names are distinct."""

    def get_all(self, name: str) -> list[str]:
        return [self[name]]


class _SigV4(SigV4Auth):
    """botocore's SigV4 signer, keeping what it made (in ``request.context``) and the day's signing key.

    The canonical request, the string to sign and the HMACs are botocore's own methods. The map of the
    headers to sign is a dict built once per signing (``SigV4Auth`` builds it twice in an
    ``email.message``-based ``HTTPHeaders`` and parses the URL for its host each time), a URL path's
    canonical form is computed once per path, and the signing key is derived as ``signature`` derives it,
    once per day (``keys``).
    """

    def __init__(self, credentials: Any, service_name: str, region_name: str, keys: dict[Any, bytes]) -> None:
        super().__init__(credentials, service_name, region_name)
        self._keys = keys

    def add_auth(self, request: Any) -> None:
        request.context.pop(_SIGNED, None)  # a request signed again (a retry) has new headers
        super().add_auth(request)

    def headers_to_sign(self, request: Any) -> Any:
        signed = request.context.get(_SIGNED)
        if signed is not None:
            return signed
        signed = _HeadersToSign()
        for name, value in request.headers.items():
            lowered = name.lower()
            if lowered not in SIGNED_HEADERS_BLACKLIST:
                signed[lowered] = value
        if "host" not in signed:
            signed["host"] = signed_host(request.url)
        # botocore asks for the map twice per signing (the canonical request, then the Authorization
        # header), with the same headers: the request's own signing keeps it.
        request.context[_SIGNED] = signed
        return signed

    def _normalize_url_path(self, path: str) -> str:
        found = _CANONICAL_PATHS.get(path)
        if found is None:
            base: Any = super()  # botocore's stubs leave out its private methods
            found = remember(_CANONICAL_PATHS, path, base._normalize_url_path(path))
        return str(found)

    def string_to_sign(self, request: Any, canonical_request: str) -> str:
        made: str = super().string_to_sign(request, canonical_request)
        request.context[_MADE] = (canonical_request, made)
        return made

    def key(self, day: str) -> bytes:
        """The signing key of ``day`` (``SigV4Auth.signature``'s derivation), derived once."""
        signer: Any = self  # botocore's stubs leave out its private attributes
        secret = self.credentials.secret_key
        region, service = signer._region_name, signer._service_name
        name = (secret, day, region, service)
        key = self._keys.get(name)
        if key is None:
            k_date = signer._sign(f"AWS4{secret}".encode(), day)
            k_region = signer._sign(k_date, region)
            k_service = signer._sign(k_region, service)
            key = remember(self._keys, name, signer._sign(k_service, "aws4_request"))
        return bytes(key)

    def signature(self, string_to_sign: str, request: Any) -> str:
        signer: Any = self
        key = self.key(request.context["timestamp"][0:8])
        return str(signer._sign(key, string_to_sign, hex=True))


class _Kind:
    """What botocore made for the first request of a kind, cut around the time and the body's hash."""

    __slots__ = ("authorization", "before_time", "key", "scope", "time_to_hash")

    def __init__(self, before_time: str, time_to_hash: str, scope: str, authorization: str, key: bytes):
        self.before_time = before_time
        self.time_to_hash = time_to_hash
        self.scope = scope
        self.authorization = authorization
        self.key = key


def _payload_hash(body: Any) -> str | None:
    """The body's SHA-256 as ``SigV4Auth.payload`` writes it, for the bodies it hashes whole."""
    if not body:
        return hashlib.sha256(b"").hexdigest()
    if isinstance(body, bytes | bytearray):
        return hashlib.sha256(body).hexdigest()
    return None  # a stream: botocore reads it


class Signer:
    """Signs requests for one botocore ``RequestSigner`` (its credentials, region and signing name) as its
    ``v4`` auth does: credentials frozen from its provider (refreshed first when they are about to expire),
    then ``SigV4Auth``, or what it made for the request's kind (see the module). Thread-safe."""

    def __init__(self, request_signer: Any) -> None:
        self._signer = request_signer
        self._credentials = request_signer._credentials
        self._keys: dict[Any, bytes] = {}
        self._kinds: dict[Any, _Kind | None] = {}

    def sign(self, request: Any) -> None:
        """Add ``X-Amz-Date``, ``X-Amz-Security-Token`` (with a session token) and ``Authorization``.

        Raises:
            NoRegionError, NoCredentialsError: nothing to sign with.
        """
        region = self._signer.region_name
        if region is None:
            raise NoRegionError()
        credentials = self._credentials
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
        if frozen is None:
            raise NoCredentialsError()
        timestamp = _AUTH.get_current_datetime().strftime(SIGV4_TIMESTAMP)
        headers = request.headers
        name = (request.url, tuple(headers.items()), frozen, region, timestamp[0:8])
        try:
            kind = self._kinds.get(name, False)
        except TypeError:  # credentials of a kind that cannot name a kind
            kind = None
        body_hash = _payload_hash(request.body) if kind is not None else None
        if kind is False or body_hash is None:
            signer = _SigV4(frozen, self._signer.signing_name, region, self._keys)
            before = dict(headers)
            signer.add_auth(request)
            if kind is False:
                remember(self._kinds, name, _kind(signer, request, before, body_hash))
            return
        assert isinstance(kind, _Kind)
        canonical = f"{kind.before_time}{timestamp}{kind.time_to_hash}{body_hash}"
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        string_to_sign = f"AWS4-HMAC-SHA256\n{timestamp}\n{kind.scope}\n{digest}"
        # hmac.new, not hmac.digest: the one-shot call releases the GIL, and taking it back costs a
        # thread of a busy client more than the HMAC
        signature = hmac.new(kind.key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
        headers["X-Amz-Date"] = timestamp
        if frozen.token:
            headers["X-Amz-Security-Token"] = frozen.token
        headers["Authorization"] = f"{kind.authorization}{signature}"


def _kind(signer: _SigV4, request: Any, before: dict[str, str], body_hash: str | None) -> _Kind | None:
    """What botocore made of ``request``, cut for the next requests of its kind; ``None`` when it does
    not have the form this class fills in."""
    made = request.context.get(_MADE)
    timestamp = request.context.get("timestamp")
    headers = request.headers
    if (
        made is None
        or body_hash is None
        or not isinstance(timestamp, str)
        or "Date" in before  # botocore signs the time of a Date header instead
        or "X-Amz-Content-SHA256" in before  # and signs that header's hash instead of the body's
    ):
        return None
    canonical, string_to_sign = made
    head, _, last = canonical.rpartition("\n")
    at_time = f"\nx-amz-date:{timestamp}\n"
    if last != body_hash or head.count(at_time) != 1:
        return None
    before_time, _, after_time = head.partition(at_time)
    day = timestamp[0:8]
    scope = signer.credential_scope(request)
    key = signer.key(day)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    signature = hmac.digest(key, string_to_sign.encode("utf-8"), "sha256").hex()
    authorization = headers.get("Authorization", "")
    prefix = authorization[: len(authorization) - len(signature)]
    token = signer.credentials.token
    expected = dict(before, **{"X-Amz-Date": timestamp}, **({"X-Amz-Security-Token": token} if token else {}))
    if (
        string_to_sign != f"AWS4-HMAC-SHA256\n{timestamp}\n{scope}\n{digest}"
        or not authorization.endswith(f"Signature={signature}")
        or {name: value for name, value in headers.items() if name != "Authorization"} != expected
    ):
        return None
    return _Kind(f"{before_time}\nx-amz-date:", f"\n{after_time}\n", scope, prefix, key)
