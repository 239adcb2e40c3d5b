"""Uploaded files, stored under the data directory by content hash.

A file lands at ``<data_dir>/imports/<sha256[:2]>/<sha256>.csv``: the client's file name never
becomes a path (no traversal, no collision, no name to sanitize), the same content uploaded twice
is stored once, and the worker finds it from the hash the import row records. The upload is
streamed to a temporary file in the same directory while it is hashed and counted, then renamed
into place (atomic on one file system), so a reader never sees half a file and a refused upload
leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

__all__ = ["FileTooLarge", "StoredFile", "resolve", "store_stream"]

IMPORTS_DIR = "imports"
_CHUNK = 1024 * 1024


class FileTooLarge(Exception):
    """The upload is larger than the allowed size."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the file is larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class StoredFile:
    """Where an upload was stored (``path`` relative to the data directory) and what it is."""

    path: str
    sha256: str
    size: int


def _chunks(stream: BinaryIO) -> Iterable[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk


def store_stream(data_dir: Path, stream: BinaryIO, *, max_bytes: int | None = None) -> StoredFile:
    """Copy ``stream`` under ``data_dir`` by its SHA-256; :class:`FileTooLarge` past ``max_bytes``.

    Reads the stream once, in chunks, never holding the file in memory.
    """
    staging = data_dir / IMPORTS_DIR / "tmp"
    staging.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    handle = tempfile.NamedTemporaryFile(dir=staging, prefix="upload-", delete=False)  # noqa: SIM115
    temporary = Path(handle.name)
    try:
        with handle:
            for chunk in _chunks(stream):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise FileTooLarge(max_bytes)
                digest.update(chunk)
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        sha = digest.hexdigest()
        relative = PurePosixPath(IMPORTS_DIR, sha[:2], f"{sha}.csv")
        final = data_dir / relative
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temporary, final)  # same content, same name: replacing is harmless
        return StoredFile(path=str(relative), sha256=sha, size=size)
    finally:
        temporary.unlink(missing_ok=True)


def resolve(data_dir: Path, relative: str) -> Path:
    """The absolute path of a stored file; ``ValueError`` for a path outside the data dir."""
    root = data_dir.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root / IMPORTS_DIR):
        raise ValueError(f"stored file path {relative!r} is outside the imports directory")
    return path
