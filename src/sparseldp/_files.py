"""Atomic file output shared by every writer (spec files, tables, figures, estimates, privatized data).

Files are written to a temporary file in the target directory and renamed
into place, so a reader sees either the old file or the complete new one, and
a failure leaves nothing behind.  Errors are ``ValueError`` naming the path,
which the CLI turns into one line on stderr and exit status 2.

Only a regular file (or a path where none exists yet) can be an output: an
existing directory, character or block device, FIFO or socket is refused
before any work (:func:`check_output_path`), since the rename would replace
it by a regular file (``-o /dev/null`` run as root replaced the device).  A
symbolic link is followed (:func:`os.path.realpath`) and its final target is
the file replaced, with the temporary file in the target's directory, so the
link stays a link; a dangling link whose target directory exists gets its
target created.  The checks apply to the resolved target, and are repeated
just before the rename.

Temporary files are named ``.<name>.sparseldp-<pid>-<random>.tmp`` beside the
target.  A run that is killed outright (``SIGKILL``, a power cut) cannot
remove its temporary file; the next write to the same target removes every
such file whose process no longer exists (:func:`clean_stale`).  ``SIGINT``
and ``SIGTERM`` unwind normally through the ``finally`` blocks here (the CLI
turns ``SIGTERM`` into an exception for that purpose).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_all", "ensure_directory", "open_temp", "temp_name", "clean_stale",
           "check_output_path", "recheck_output_path", "same_file"]

_TAG = "sparseldp"


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


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


#: What an existing output path may not be (the rename would replace it by a regular file).
_SPECIAL = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))
_NOT_REGULAR = ("not a regular file: an output is written to a temporary file that is then renamed over "
                "its path, which would replace it; name a regular file (commands that can write to standard "
                "output take '-')")


def _kind(path, follow: bool) -> str | None:
    """What ``path`` is when it is a directory, a device, a FIFO or a socket; ``None`` otherwise."""
    try:
        mode = (os.stat(path) if follow else os.lstat(path)).st_mode
    except (OSError, ValueError):  # missing (or unreadable): the directory check below speaks
        return None
    for test, name in _SPECIAL:
        if test(mode):
            return name
    return None


def check_output_path(path, what: str = "output") -> Path:
    """Refuse, before any work, an output that cannot be replaced by a regular file; return the file to replace.

    Refused (``ValueError`` naming the path and what it is): a missing
    directory, and an existing directory, character or block device, FIFO
    or socket, directly or through symbolic links.  A symbolic link is
    resolved with :func:`os.path.realpath` and the checks apply to its final
    target, which is returned: the file to write (temporary file in its
    directory) and replace, so the link itself stays a link.  A dangling
    link is fine when its target's directory exists (the target is created).
    Otherwise ``path`` itself is returned.  ``-`` is not special here: the
    callers handle standard output before calling this.
    """
    path = Path(path)
    shown = str(path)
    target, via = path, ""
    if os.path.islink(path):
        target = Path(os.path.realpath(path))
        if os.path.islink(target):  # realpath stops inside a loop of links
            raise ValueError(f"cannot write {what} {shown!r}: it is a symbolic link that loops "
                             "(too many levels of symbolic links)")
        via = f"a symbolic link to {str(target)!r}, "
    # os.stat follows links realpath cannot name (/dev/stdout -> /proc/self/fd/1 -> pipe:[...]).
    kind = _kind(path, follow=True) or _kind(target, follow=False)
    if kind == "a directory":
        raise ValueError(f"cannot write {what} {shown!r}: it is {via}{kind}")
    if kind is not None:
        raise ValueError(f"cannot write {what} {shown!r}: it is {via}{kind}, {_NOT_REGULAR}")
    parent = _parent(target)
    if not parent.is_dir():
        if via:
            raise ValueError(f"cannot write {what} {shown!r}: it is {via}whose directory {str(parent)!r} "
                             "does not exist")
        raise ValueError(f"cannot write {what} {shown!r}: directory {str(parent)!r} does not exist")
    return target


def recheck_output_path(path, target: Path, what: str = "output") -> None:
    """Just before the rename: ``path`` still resolves to ``target``, and that is still no special file."""
    if check_output_path(path, what) != target:
        raise ValueError(f"cannot write {what} {str(path)!r}: the path changed while the output was being "
                         "written (it now leads elsewhere); nothing was written")


def same_file(a, b) -> bool:
    """True when paths ``a`` and ``b`` name one file (same path, through links, or the same inode)."""
    a, b = Path(a), Path(b)
    if os.path.abspath(a) == os.path.abspath(b) or os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:  # pragma: no cover
        return False


# Temporary files created by open_temp in this process (see remove_live_temps).
_LIVE: set = set()


def temp_name(path) -> Path:
    """A fresh temporary path beside ``path``: ``.<name>.sparseldp-<pid>-<random>.tmp``."""
    path = Path(path)
    return _parent(path) / f".{path.name}.{_TAG}-{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OverflowError:
        return False
    return True


def clean_stale(path) -> list[Path]:
    """Remove temporary files (or a Spark job's temporary directories) of ``path`` left by runs whose
    process is gone; return them.

    Only files named by :func:`temp_name` for this very target are considered,
    and only when the process id in the name no longer exists, so a run in
    progress (in this or another process) is never disturbed.
    """
    path = Path(path)
    parent = _parent(path)
    pattern = re.compile(re.escape(f".{path.name}.{_TAG}-") + r"(\d+)-[0-9a-f]{8}\.tmp\Z")
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):  # a Spark job's output directory (sparseldp.spark)
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:  # pragma: no cover - raced with another cleaner, or not ours to remove
            pass
    return removed


def open_temp(path) -> tuple[int, Path]:
    """Create the temporary file for ``path`` (``O_EXCL``, mode ``0o666`` less the umask; the existing
    file's permission bits when ``path`` exists, so that replacing a ``0o600`` output does not make it
    readable by everyone).

    Stale temporary files of the same target are removed first
    (:func:`clean_stale`).  Returns ``(fd, temp_path)``; the caller writes,
    then ``os.replace(temp_path, path)``, and unlinks ``temp_path`` in a
    ``finally`` block if it still exists.
    """
    path = Path(path)
    clean_stale(path)
    tmp = temp_name(path)
    _LIVE.add(tmp)  # before it exists: an interruption at any point after os.open finds it here
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        _LIVE.discard(tmp)
        raise ValueError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
    except OSError:
        pass  # a new file (0o666 less the umask), or a file system without modes: as created
    return fd, tmp


def remove_live_temps() -> None:
    """Unlink every temporary file this process created and has not renamed or removed.

    The callers' ``finally`` blocks remove their temporary files, but a signal
    can arrive between ``os.open`` and the caller's ``try``; the CLI calls this
    when it is interrupted.  The names are unique to this process (pid and
    random tag), so a name that was renamed into place no longer exists and
    nothing else can be hit.
    """
    for tmp in list(_LIVE):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _LIVE.discard(tmp)


def atomic_write_all(files: dict) -> list[Path]:
    """Write several ``path -> bytes | str`` files all or nothing.

    Every path is checked first (:func:`check_output_path`: no directory,
    device, FIFO or socket; a symbolic link's final target is what is
    written).  Every file goes to a temporary file in its target directory; only
    when all are written are they renamed into place, so a failure to create or
    fill any of them (missing or unwritable directory, disk full, an
    interruption) leaves no new file behind.  Only a failing rename, after an
    earlier one succeeded, could leave that earlier file in place.  Text is
    written as UTF-8.
    """
    staged = []
    done = []
    try:
        for path, data in files.items():
            path = Path(path)
            target = check_output_path(path, "output")  # the link's target for a symbolic link
            if isinstance(data, str):
                data = data.encode("utf-8")
            fd, tmp = open_temp(target)
            staged.append((tmp, path, target))
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            except OSError as exc:
                raise ValueError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        for _, path, target in staged:
            recheck_output_path(path, target, "output")
        for tmp, path, target in staged:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise ValueError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
            done.append(path)
    finally:
        for tmp, _, _ in staged:
            if tmp.exists():
                tmp.unlink()
    return done


def atomic_write(path, data) -> Path:
    """Write one file (bytes, or text as UTF-8) atomically; see :func:`atomic_write_all`."""
    return atomic_write_all({path: data})[0]
