"""API keys: how they read, how they are kept (scrypt, never the secret), and the verifier
that turns an Authorization header into a principal.

A key reads `mgw_<key id>_<secret>`. It comes as `Authorization: Bearer <key>` or as HTTP Basic
with the key as password and its principal or key ID as user (zeep, suds and curl all speak
Basic). A key verified once is remembered for `auth_cache_ttl_s` (by a SHA-256 of the whole
key, and by the header it came in), so later requests cost a dictionary look-up, and a key
revoked in another process stops working within that time.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Any

from qm.access import AccessRepository, ApiKeyRecord

KEY_PREFIX = "mgw"
REALM = 'Basic realm="msmq-gateway", charset="UTF-8"'
SCRYPT_N, SCRYPT_R, SCRYPT_P, HASH_BYTES = 2**14, 8, 1, 32
"""scrypt's cost: about 40 ms and 16 MB per verification, once per key per process (then a
read of the key's record per TTL, to see a revocation)."""


def new_key() -> tuple[str, str, str]:
    """(the key as shown once, its ID, its secret)."""
    key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    return f"{KEY_PREFIX}_{key_id}_{secret}", key_id, secret


def split_key(text: str) -> tuple[str, str] | None:
    prefix, _, rest = text.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != KEY_PREFIX or len(key_id) != 16 or not secret or len(text) > 200:
        return None
    return key_id, secret


def hash_secret(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(
        secret.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=HASH_BYTES, maxmem=64 << 20
    )


def key_record(principal: str, description: str, now: Any) -> tuple[str, ApiKeyRecord]:
    """A new key for `principal`: the text to show once, and what is stored."""
    text, key_id, secret = new_key()
    salt = secrets.token_bytes(16)
    return text, ApiKeyRecord(key_id, principal, salt, hash_secret(secret, salt), description, now)


class KeyVerifier:
    """Key text -> principal, remembered for a TTL once verified."""

    def __init__(
        self, store: AccessRepository, ttl_s: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._verified: dict[str, tuple[float, bytes, str]] = {}
        self._proved: dict[str, tuple[bytes, bytes]] = {}
        """key ID -> (SHA-256 of the key, its stored hash) of keys scrypt has proved."""
        self._headers: dict[bytes, tuple[float, str, str]] = {}
        """Authorization header -> (until, key ID, principal), for headers that proved a key."""
        self._verifying: dict[tuple[str, bytes], asyncio.Future[str | None]] = {}
        """Verifications under way: the requests that arrive meanwhile with the same key wait
        for that one (64 clients starting at once would otherwise hash 64 times)."""
        # scrypt is slow on purpose: one at a time, off the event loop, so that a flood of
        # wrong keys costs one core's worth of hashing and never stalls the other requests.
        self._hashing = asyncio.Semaphore(1)
        self._turns: dict[str, _Turn] = {}
        """Key ID -> its hashes' turn: one hash per key ID waits for the core at a time. Key IDs
        are no secret, and first come first served put a valid key behind every wrong secret
        a flood sent for another key's ID (100 of them: 4.6 s)."""

    async def principal_for(self, header: bytes) -> str | None:
        """The principal an Authorization header proves. A header seen with a key verified
        within the TTL is looked up as it came: no decoding, parsing or hashing (its dict key's
        hash is SipHash with a per-process secret, so a look-up tells nothing of other keys)."""
        remembered = self._headers.get(header)
        if remembered is not None and remembered[0] > self._monotonic():
            return remembered[2]
        key, user = credentials(header)
        principal = await self.principal_of(key, user)
        parts = split_key(key)
        if principal is None or parts is None or parts[0] not in self._verified:
            return principal
        if len(self._headers) >= 4096:  # bounded, like everything a client chooses
            self._headers.clear()
        self._headers[header] = (self._verified[parts[0]][0], parts[0], principal)
        return principal

    async def principal_of(self, key: str, user: str | None = None) -> str | None:
        parts = split_key(key)
        if parts is None:
            return None
        key_id, secret = parts
        digest = hashlib.sha256(key.encode()).digest()
        remembered = self._verified.get(key_id)
        if remembered is not None and remembered[0] > self._monotonic():
            principal = remembered[2] if hmac.compare_digest(remembered[1], digest) else None
        else:
            principal = await self._verify_once(key_id, secret, digest)
        if principal is None or user not in (None, "", principal, key_id):
            return None
        return principal

    async def _verify_once(self, key_id: str, secret: str, digest: bytes) -> str | None:
        pending = self._verifying.get((key_id, digest))
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():  # this request was cancelled, not the verification
                    raise
                return await self._verify(key_id, secret, digest)
        if len(self._verifying) >= 1024:  # a flood of distinct keys: no sharing, still bounded work
            return await self._verify(key_id, secret, digest)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._verifying[(key_id, digest)] = future
        try:
            principal = await self._verify(key_id, secret, digest)
        except BaseException:
            future.cancel()  # those waiting verify for themselves
            raise
        else:
            future.set_result(principal)
        finally:
            del self._verifying[(key_id, digest)]
        return principal

    async def _verify(self, key_id: str, secret: str, digest: bytes) -> str | None:
        record = await self._store.find_key(key_id)
        if record is None or record.revoked_at is not None:
            return None
        if not self._proved_before(key_id, digest, record.hash):
            computed = await self._hash_in_turn(key_id, secret, record.salt)
            if not hmac.compare_digest(computed, record.hash):
                return None
            if len(self._proved) >= 4096:
                self._proved.clear()
            self._proved[key_id] = (digest, record.hash)
        if len(self._verified) >= 4096:  # keys in use are few; bounded all the same
            self._verified.clear()
        self._verified[key_id] = (self._monotonic() + self._ttl_s, digest, record.principal)
        return record.principal

    async def _hash_in_turn(self, key_id: str, secret: str, salt: bytes) -> bytes:
        """Hashes of one key ID queue among themselves, then for the core: a flood for one ID
        waits for itself, and other keys pass it (entries exist only for IDs of stored keys)."""
        turn = self._turns.get(key_id)
        if turn is None:
            turn = self._turns[key_id] = _Turn()
        turn.users += 1
        try:
            async with turn.lock, self._hashing:
                return await asyncio.to_thread(hash_secret, secret, salt)
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[key_id]

    def _proved_before(self, key_id: str, digest: bytes, stored_hash: bytes) -> bool:
        """This very key matched this very stored hash already: once its remembered verification
        runs out, a look-up of the record (still there, not revoked) is all it needs again."""
        proved = self._proved.get(key_id)
        return (
            proved is not None
            and hmac.compare_digest(proved[0], digest)
            and hmac.compare_digest(proved[1], stored_hash)
        )

    def forget(self, key_id: str) -> None:
        """After a revocation in this process: refused from the next request on."""
        self._verified.pop(key_id, None)
        self._proved.pop(key_id, None)
        for header in [header for header, (_, owner, _) in self._headers.items() if owner == key_id]:
            del self._headers[header]


class _Turn:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class Unauthenticated(Exception):
    """Credentials were sent and are not valid: 401, whatever the operation."""


def credentials(header: bytes) -> tuple[str, str | None]:
    """(key, Basic user name or None) from an Authorization header's value."""
    scheme, _, token = header.decode("latin-1").strip().partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        return token, None
    if scheme.lower() == "basic" and token:
        return _basic(token)
    raise Unauthenticated("use Authorization: Bearer <key>, or Basic with the key as password")


def _basic(token: str) -> tuple[str, str]:
    try:
        user, colon, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("the Basic credentials are not base64 of user:password") from None
    if not colon:
        raise Unauthenticated("the Basic credentials are not base64 of user:password")
    return password, user
