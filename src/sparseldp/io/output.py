"""Where a privatized copy goes: one atomic file, or standard output once the whole input succeeded.

Part of :mod:`sparseldp.io`.  A file is written through the package's one
atomic-output path, :mod:`sparseldp._files` (a temporary beside the target,
fsynced, then :func:`os.replace`; directories, devices, FIFOs and sockets are
refused, a symbolic link's final target is what is replaced); this module
adds the checks that are specific to a privatized copy (not the input itself,
same format).  Standard output is buffered in an anonymous temporary file in
the system's temporary directory and copied out only after the last row
succeeded (:func:`_write_stdout`), so a failed run writes nothing there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .._files import check_output_path, open_temp, recheck_output_path, same_file
from .sources import _EXTENSIONS, _Source

#: Bytes copied at a time from the buffer to standard output.
_COPY_BYTES = 1 << 20


def _check_output(src: _Source, output: Path, fmt: str) -> Path:
    """Check ``output`` before any work; return the file that will be replaced (a link's final target)."""
    target = check_output_path(output, "output")
    if src.path is not None and same_file(target, src.path):  # (same_file follows links: output's is target's)
        raise ValueError(f"output {str(output)!r} is the input file; write the privatized copy elsewhere")
    if src.path is None and _is_stdin_file(src, target):
        raise ValueError(f"output {str(output)!r} is the file on standard input; write the privatized copy "
                         "elsewhere")
    out_ext = _EXTENSIONS.get(output.suffix.lower())
    if out_ext is not None and out_ext != fmt:
        raise ValueError(f"output {str(output)!r} looks like {out_ext} but the input is {fmt} (by its extension, "
                         "or format= / --format); privatize keeps the input's format (no conversion)")
    return target


def _is_stdin_file(src: _Source, target: Path) -> bool:
    """Standard input is redirected from ``target`` itself (``privatize - -o data.csv < data.csv``)."""
    try:
        return os.path.samestat(os.fstat(src.fh.fileno()), os.stat(target))
    except (OSError, AttributeError, ValueError):  # no such file yet, or no descriptor (a test's BytesIO)
        return False


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


def _write_stdout(out, write: Callable) -> int:
    """``write(buffer)`` into an anonymous temporary file, then copy it to ``out`` (standard output).

    The buffer lives in the system's temporary directory (:func:`tempfile.gettempdir`) and has no name
    (:func:`tempfile.TemporaryFile`: ``O_TMPFILE`` on Linux, elsewhere unlinked as soon as it is
    created), so closing it, on every exit including ``KeyboardInterrupt``, or the process dying removes
    it.  Nothing reaches ``out`` unless ``write`` returned: a bad value in the last row leaves standard
    output empty.
    """
    tmpdir = tempfile.gettempdir()
    try:
        buf = tempfile.TemporaryFile(prefix=".sparseldp-stdout-", suffix=".tmp")
    except OSError as exc:
        raise ValueError(f"cannot write output '-': cannot create the temporary file in {tmpdir!r} that holds "
                         f"the output until the input is read ({exc.strerror or exc}; set TMPDIR to a "
                         "writable directory)") from None
    with buf:  # closed, and so removed, on every exit
        try:
            rows = write(buf)
            buf.flush()
            buf.seek(0)
        except OSError as exc:
            raise ValueError(f"cannot write output '-': the temporary file in {tmpdir!r} that holds the output "
                             f"until the input is read failed: {exc.strerror or exc}") from None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()  # anything written to the text layer before goes first
        try:
            shutil.copyfileobj(buf, out, _COPY_BYTES)
            out.flush()
        except OSError as exc:
            raise ValueError(f"cannot write output '-' (standard output): {exc.strerror or exc}") from None
        finally:
            with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: already reported
                out.flush()
    return rows


def _write_atomically(path: Path, target: Path, write: Callable) -> int:
    """``write(fh)`` into a temporary file beside ``target``, the file ``path`` leads to (what
    :func:`_check_output` returned), fsync, rename; the temporary never survives.  For a symbolic link
    the link's final target is replaced, not the link."""
    try:
        fd, tmp = open_temp(target)  # mode 0o666 less the umask; stale temporaries of dead runs removed
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
        recheck_output_path(path, target, "output")  # not turned into a FIFO or a link meanwhile
        os.replace(tmp, target)
    except OSError as exc:
        raise ValueError(f"cannot write output {str(path)!r}: {exc.strerror or exc}") from None
    finally:  # every exit, KeyboardInterrupt and SystemExit included
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return result
