"""Atomic file output shared by every writer (spec files, tables, figures, estimates).

Files are written to a temporary file in the target directory and renamed
into place, so a reader sees either the old file or the complete new one, and
a failure leaves nothing behind.  Errors are ``ValueError`` naming the path,
which the CLI turns into one line on stderr and exit status 2.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_all", "ensure_directory"]


def ensure_directory(path) -> Path:
    """Create directory ``path`` (and parents); ``ValueError`` if it cannot be one."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"output directory {str(path)!r} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create output directory {str(path)!r}: {exc.strerror or exc}") from None
    return path


def atomic_write_all(files: dict) -> list[Path]:
    """Write several ``path -> bytes | str`` files all or nothing.

    Every file goes to a temporary file in its target directory first; only
    when all are written are they renamed into place, so a failure to create or
    fill any of them (missing or unwritable directory, disk full) leaves no new
    file behind.  Only a failing rename, after an earlier one succeeded, could
    leave that earlier file in place.  Text is written as UTF-8.
    """
    staged = []
    done = []
    try:
        for path, data in files.items():
            path = Path(path)
            if isinstance(data, str):
                data = data.encode("utf-8")
            parent = path.parent if str(path.parent) else Path(".")
            if not parent.is_dir():
                raise ValueError(f"cannot write {str(path)!r}: directory {str(parent)!r} does not exist")
            if path.is_dir():
                raise ValueError(f"cannot write {str(path)!r}: it is a directory")
            # os.open with mode 0o666 honours the umask (tempfile.mkstemp would force 0o600)
            tmp = parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                staged.append((tmp, path))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            except OSError as exc:
                raise ValueError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise ValueError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
            done.append(path)
    finally:
        for tmp, _ in staged:
            if tmp.exists():
                tmp.unlink()
    return done


def atomic_write(path, data) -> Path:
    """Write one file (bytes, or text as UTF-8) atomically; see :func:`atomic_write_all`."""
    return atomic_write_all({path: data})[0]
