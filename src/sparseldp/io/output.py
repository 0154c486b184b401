"""Where a privatized copy goes: one atomic file, or standard output batch by batch.

Part of :mod:`sparseldp.io`.  A file is written through the package's one
atomic-output path, :mod:`sparseldp._files` (a temporary beside the target,
fsynced, then :func:`os.replace`); this module adds the checks that are
specific to a privatized copy (not the input itself, same format).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from .._files import check_output_path, open_temp, same_file
from .sources import _EXTENSIONS, _Source


def _check_output(src: _Source, output: Path, fmt: str) -> None:
    check_output_path(output, "output")
    if src.path is not None and same_file(output, src.path):
        raise ValueError(f"output {str(output)!r} is the input file; write the privatized copy elsewhere")
    out_ext = _EXTENSIONS.get(output.suffix.lower())
    if out_ext is not None and out_ext != fmt:
        raise ValueError(f"output {str(output)!r} looks like {out_ext} but the input is {fmt}; "
                         "privatize keeps the input's format (no conversion)")


def _stdout_for(src: _Source):
    """``sys.stdout.buffer``, refusing the case where it is the input file itself (``>> input.csv``)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        raise ValueError("cannot write output '-': standard output is not available")
    if src.path is not None:
        try:
            same = os.path.samestat(os.fstat(out.fileno()), os.fstat(src.fh.fileno()))
        except (OSError, AttributeError, ValueError):  # no file descriptor (a test's BytesIO)
            same = False
        if same:
            raise ValueError(f"standard output is the input file {str(src.path)!r}; "
                             "write the privatized copy elsewhere")
    return out


def _write_atomically(path: Path, write: Callable) -> int:
    """``write(fh)`` into a temporary file beside ``path``, fsync, rename; the temporary never survives."""
    try:
        fd, tmp = open_temp(path)  # mode 0o666 less the umask; stale temporaries of dead runs removed
    except ValueError as exc:  # "cannot write 'x': ..." -> the wording of every other output error here
        raise ValueError(str(exc).replace("cannot write ", "cannot write output ", 1)) from None
    try:
        try:
            fh = os.fdopen(fd, "wb")
        except BaseException:  # pragma: no cover - fdopen of a fresh fd fails only on memory errors
            os.close(fd)
            raise
        with fh:
            result = write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise ValueError(f"cannot write output {str(path)!r}: {exc.strerror or exc}") from None
    finally:  # every exit, KeyboardInterrupt and SystemExit included
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return result
