"""The ids of the event stream (docs/events.md, "Event ids"): opaque to clients, made and read
by every API process of a deployment with the feed's shared key."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct

from jobs_core.events import Position


class EventIds:
    """Event ids a client cannot read: the position, encrypted and authenticated.

    ``nonce (8) | position XOR blake2b(enc_key, nonce) (16) | blake2b-MAC(mac_key) (10)`` in
    URL-safe base64 (46 characters). The nonce is random per id, so an id tells nothing about
    the position (nor about other orgs' changes between two ids); the MAC makes an altered or
    made-up id fail to decode instead of pointing somewhere else in the log. The keys derive
    from the feed's key, which every API process of a deployment shares.
    """

    def __init__(self, key: bytes) -> None:
        self._enc = hashlib.blake2b(key, person=b"jobs-ev-enc").digest()[:32]
        self._mac = hashlib.blake2b(key, person=b"jobs-ev-mac").digest()[:32]

    def encode(self, position: Position) -> str:
        """The id of ``position``."""
        nonce = os.urandom(8)
        plain = struct.pack(">QQ", position.xid, position.seq)
        pad = hashlib.blake2b(nonce, key=self._enc, digest_size=16).digest()
        cipher = bytes(a ^ b for a, b in zip(plain, pad, strict=True))
        tag = hashlib.blake2b(nonce + cipher, key=self._mac, digest_size=10).digest()
        return base64.urlsafe_b64encode(nonce + cipher + tag).decode()

    def decode(self, raw: str) -> Position | None:
        """The position of an id this deployment made, else None."""
        try:
            data = base64.urlsafe_b64decode(raw.encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            return None
        if len(data) != 34:
            return None
        nonce, cipher, tag = data[:8], data[8:24], data[24:]
        expected = hashlib.blake2b(nonce + cipher, key=self._mac, digest_size=10).digest()
        if not hmac.compare_digest(tag, expected):
            return None
        pad = hashlib.blake2b(nonce, key=self._enc, digest_size=16).digest()
        xid, seq = struct.unpack(">QQ", bytes(a ^ b for a, b in zip(cipher, pad, strict=True)))
        return Position(xid, seq)
