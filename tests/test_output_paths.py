"""Output paths that are not regular files, and standard output that only receives a finished run.

Regressions of a user trial: ``privatize -o /dev/full`` run as root replaced the device by a regular
file (the temporary-then-rename step of :mod:`sparseldp._files`), the same for ``/dev/null``, a FIFO
(its reader got nothing) and a symbolic link (the link was replaced instead of its target written);
and ``privatize ... -o -`` streamed 20,000 rows to stdout before a bad value in a late row made it
exit 2.  Now a directory, device, FIFO or socket is refused before any work, a link's final target
is what gets replaced, and ``-o -`` is buffered in a temporary file until the whole input succeeded.

``/dev/null`` is only ever checked for refusal here, never written: the ``no_dev_writes`` fixture
makes any attempt to create a temporary file in ``/dev`` or rename onto a path there fail the test
(tests may run as root, where such a write would succeed and replace the device).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest

import sparseldp.io as sio
from sparseldp import SparseLaplace, _files
from sparseldp.spec import load_spec, save_spec
from cli_helpers import one_error as _one_error, run

SPEC = {"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 3,
        "delta_star": float(SparseLaplace(lam=0.5, s=7).delta_star(1.0, 3))}

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
needs_symlink = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
needs_dev_null = pytest.mark.skipif(not (os.path.exists("/dev/null")
                                         and stat.S_ISCHR(os.stat("/dev/null").st_mode)),
                                    reason="no /dev/null character device")


def one_error(capsys, *argv) -> str:
    """Exit 2, one ``error:`` line on stderr, nothing on stdout (:func:`cli_helpers.one_error`)."""
    return _one_error(capsys, *argv, quiet_stdout=True)


def _cli(*args, stdin=None, cwd=None, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "sparseldp", *map(str, args)], input=stdin, capture_output=True,
                          timeout=timeout, cwd=cwd, env=env)


def _snapshot(directory: Path) -> dict:
    """Every entry of ``directory``: name -> (kind, content or link text)."""
    snap = {}
    for p in directory.iterdir():
        if p.is_symlink():
            snap[p.name] = ("link", os.readlink(p))
        elif stat.S_ISFIFO(p.lstat().st_mode):
            snap[p.name] = ("fifo", None)
        elif stat.S_ISSOCK(p.lstat().st_mode):
            snap[p.name] = ("socket", None)
        elif p.is_dir():
            snap[p.name] = ("dir", sorted(c.name for c in p.iterdir()))
        else:
            snap[p.name] = ("file", p.read_bytes())
    return snap


@pytest.fixture
def d(tmp_path):
    (tmp_path / "mech.json").write_text(json.dumps(SPEC))
    a = np.random.default_rng(7).permutation(np.arange(200) % 10)  # a random row order (sparseldp.io.order)
    (tmp_path / "ab.csv").write_text("id,a\n" + "".join(f"{i},{a[i]}\n" for i in range(200)))
    return tmp_path


@pytest.fixture
def no_dev_writes(monkeypatch):
    """Fail the test (AssertionError, never a write) if anything creates a temporary in /dev or renames onto it."""
    real_temp_name, real_replace = _files.temp_name, os.replace

    def under_dev(path) -> bool:
        return os.path.realpath(path).startswith("/dev/") or os.path.abspath(path).startswith("/dev/")

    def temp_name(path):
        if under_dev(path):
            raise AssertionError(f"a temporary file was about to be created beside {str(path)!r}")
        return real_temp_name(path)

    def replace(src, dst, *args, **kwargs):
        if under_dev(dst):
            raise AssertionError(f"{str(dst)!r} was about to be replaced")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(_files, "temp_name", temp_name)
    monkeypatch.setattr(os, "replace", replace)


# -- special files are refused, up front --------------------------------------------------------


@needs_fifo
def test_fifo_output_is_refused_by_the_library(d):
    fifo = d / "out.csv"
    os.mkfifo(fifo)
    before = _snapshot(d)
    with pytest.raises(ValueError, match=r"cannot write output '.*out\.csv': it is a FIFO \(named pipe\), "
                                         r"not a regular file"):
        sio.privatize_file(d / "ab.csv", fifo, mechanism=d / "mech.json", column="a", rng=1)
    with pytest.raises(ValueError, match=r"it is a FIFO"):
        _files.atomic_write(fifo, "x")
    with pytest.raises(ValueError, match=r"it is a FIFO"):
        save_spec(load_spec(d / "mech.json"), fifo)
    with pytest.raises(ValueError, match=r"it is a FIFO"):
        _files.check_output_path(fifo)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert _snapshot(d) == before  # no temporary file, nothing replaced


@needs_fifo
@pytest.mark.parametrize("argv", [
    ["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{fifo}.csv"],
    ["estimate", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{fifo}.csv", "--domain", "0:9"],
    ["estimate", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/e.csv", "--domain", "0:9", "--plot",
     "{fifo}.png"],
    ["report", "-m", "{d}/mech.json", "-o", "{fifo}.html"],
    ["design", "--family", "laplace", "--eps", "1", "--delta", "1e-6", "--H", "3", "-o", "{fifo}.json"],
    ["compare", "--eps", "1", "--delta", "1e-6", "--H", "3", "--domain", "0:20", "-o", "{fifo}.json"],
])
def test_fifo_output_is_refused_by_every_command(d, capsys, argv):
    fifo = d / "f"
    argv = [a.replace("{fifo}", str(fifo)).replace("{d}", str(d)) for a in argv]
    target = Path(next(a for a in argv if a.startswith(str(fifo))))
    os.mkfifo(target)
    before = _snapshot(d)
    line = one_error(capsys, *argv)
    assert repr(str(target)) in line and "it is a FIFO (named pipe)" in line, line
    assert stat.S_ISFIFO(target.lstat().st_mode)
    assert _snapshot(d) == before


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")
def test_socket_output_is_refused(tmp_path):
    path = tmp_path / "s.csv"
    if len(str(path)) > 100:  # pragma: no cover - AF_UNIX path length limit
        pytest.skip("temporary path too long for a Unix socket")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(ValueError, match=r"it is a socket"):
            _files.atomic_write(path, b"x")
        assert stat.S_ISSOCK(path.lstat().st_mode)


def test_directory_output_is_refused(d, capsys):
    (d / "out.csv").mkdir()
    (d / "out.csv" / "keep").write_text("kept")
    before = _snapshot(d)
    with pytest.raises(ValueError, match=r"cannot write output '.*out\.csv': it is a directory"):
        sio.privatize_file(d / "ab.csv", d / "out.csv", mechanism=d / "mech.json", column="a", rng=1)
    with pytest.raises(ValueError, match=r"it is a directory"):
        _files.atomic_write_all({d / "fine.json": "{}", d / "out.csv": "x"})  # all or nothing
    line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "out.csv")
    assert "it is a directory" in line
    assert _snapshot(d) == before


@needs_symlink
def test_symlink_to_a_directory_is_refused(d, capsys):
    (d / "sub").mkdir()
    os.symlink(d / "sub", d / "link.csv")
    before = _snapshot(d)
    line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "link.csv")
    assert "link.csv" in line and "a directory" in line
    assert _snapshot(d) == before


@needs_dev_null
def test_char_device_is_refused_and_never_written(d, capsys, no_dev_writes):
    before = os.stat("/dev/null")
    with pytest.raises(ValueError, match=r"cannot write output '/dev/null': it is a character device"):
        _files.check_output_path("/dev/null")
    with pytest.raises(ValueError, match=r"'/dev/null': it is a character device"):
        sio.privatize_file(d / "ab.csv", "/dev/null", mechanism=d / "mech.json", column="a", rng=1)
    with pytest.raises(ValueError, match=r"'/dev/null': it is a character device"):
        _files.atomic_write("/dev/null", b"x")
    line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", "/dev/null")
    assert "'/dev/null': it is a character device" in line and "'-'" in line  # says how to reach stdout
    line = one_error(capsys, "report", "-m", d / "mech.json", "-o", "/dev/null")
    assert "character device" in line
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


@needs_dev_null
@needs_symlink
def test_symlink_to_a_char_device_is_refused(d, capsys, no_dev_writes):
    os.symlink("/dev/null", d / "null.csv")
    before = _snapshot(d)
    line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "null.csv")
    assert "null.csv" in line and "a symbolic link to '/dev/null', a character device" in line
    assert _snapshot(d) == before and stat.S_ISCHR(os.stat("/dev/null").st_mode)


# -- symbolic links are written through -----------------------------------------------------------


def _ages(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    assert lines[0] == "id,a"
    return lines[1:]


@needs_symlink
def test_symlink_output_writes_its_target(d, capsys):
    real_dir = d / "real"
    real_dir.mkdir()
    target = real_dir / "out.csv"
    target.write_text("old content\n")
    os.symlink(os.path.relpath(target, d), d / "link.csv")  # relative link
    os.symlink(d / "link.csv", d / "link2.csv")  # a chain of links
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "link2.csv",
                     "--seed", "1")
    assert rc == 0, err
    assert (d / "link.csv").is_symlink() and (d / "link2.csv").is_symlink()
    assert os.readlink(d / "link.csv") == os.path.relpath(target, d)  # the links are untouched
    assert os.readlink(d / "link2.csv") == str(d / "link.csv")
    assert len(_ages(target)) == 200  # the target holds the privatized copy
    assert sorted(p.name for p in real_dir.iterdir()) == ["out.csv"]  # no temporary left in either directory
    assert sorted(p.name for p in d.iterdir()) == ["ab.csv", "link.csv", "link2.csv", "mech.json", "real"]


@needs_symlink
def test_symlink_output_library_and_other_writers(d):
    target = d / "t.json"
    target.write_text("{}")
    os.symlink("t.json", d / "l.json")
    _files.atomic_write(d / "l.json", "data\n")
    assert (d / "l.json").is_symlink() and target.read_text() == "data\n"
    save_spec(load_spec(d / "mech.json"), d / "l.json")
    assert (d / "l.json").is_symlink() and json.loads(target.read_text())["family"] == "laplace"
    os.symlink("p.csv", d / "lp.csv")
    result = sio.privatize_file(d / "ab.csv", d / "lp.csv", mechanism=d / "mech.json", column="a", rng=2)
    assert result.rows == 200 and (d / "lp.csv").is_symlink() and len(_ages(d / "p.csv")) == 200
    assert not [p for p in d.iterdir() if ".sparseldp-" in p.name]


@needs_symlink
def test_dangling_symlink_gets_its_target_created(d, capsys):
    (d / "sub").mkdir()
    os.symlink(d / "sub" / "new.csv", d / "dangling.csv")
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "dangling.csv")
    assert rc == 0, err
    assert (d / "dangling.csv").is_symlink() and (d / "sub" / "new.csv").is_file()
    assert len(_ages(d / "sub" / "new.csv")) == 200
    assert sorted(p.name for p in (d / "sub").iterdir()) == ["new.csv"]
    # a dangling link into a directory that does not exist: refused, nothing created
    os.symlink(d / "nodir" / "x.csv", d / "nowhere.csv")
    before = _snapshot(d)
    line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "nowhere.csv")
    assert "nowhere.csv" in line and "does not exist" in line
    assert _snapshot(d) == before and not (d / "nodir").exists()


@needs_symlink
def test_symlink_loop_is_refused(d, capsys):
    os.symlink("b.csv", d / "a.csv")
    os.symlink("a.csv", d / "b.csv")
    before = _snapshot(d)
    line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "a.csv")
    assert "loops" in line
    assert _snapshot(d) == before


@needs_symlink
def test_symlink_to_an_input_is_still_refused(d, capsys):
    os.symlink("ab.csv", d / "l.csv")
    os.link(d / "ab.csv", d / "hard.csv")
    before = _snapshot(d)
    for out in ("l.csv", "hard.csv"):
        with pytest.raises(ValueError, match="is the input file"):
            sio.privatize_file(d / "ab.csv", d / out, mechanism=d / "mech.json", column="a", rng=1)
        line = one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / out)
        assert "is the file read by the input" in line
    assert _snapshot(d) == before


def test_output_that_is_the_file_on_stdin_is_refused(d):
    before = _snapshot(d)
    with open(d / "ab.csv", "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "sparseldp", "privatize", "-", "-m", str(d / "mech.json"),
                               "-c", "a", "-o", str(d / "ab.csv")], stdin=stdin, capture_output=True, timeout=120)
    lines = [line for line in proc.stderr.decode().splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "is the file on standard input" in lines[0], proc.stderr
    assert _snapshot(d) == before


@needs_fifo
def test_output_turned_into_a_fifo_while_writing_is_not_replaced(d):
    out = d / "out.csv"

    def progress(rows, fraction):
        if not out.exists():
            os.mkfifo(out)

    with pytest.raises(ValueError, match=r"it is a FIFO"):
        sio.privatize_file(d / "ab.csv", out, mechanism=d / "mech.json", column="a", rng=1, batch_size=50,
                           progress=progress)
    assert stat.S_ISFIFO(out.lstat().st_mode)
    assert not [p for p in d.iterdir() if ".sparseldp-" in p.name]


# -- standard output receives only a finished run --------------------------------------------------


class _Std:
    """A stand-in for sys.stdout: ``.buffer`` is a BytesIO."""

    def __init__(self):
        self.buffer = BytesIO()

    def flush(self):
        pass


@pytest.fixture
def private_tmpdir(tmp_path, monkeypatch):
    """The system temporary directory, redirected to an empty directory the test can list."""
    tmpdir = tmp_path / "systmp"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    return tmpdir


def _late_error_csv(path: Path, rows: int = 20_000) -> Path:
    path.write_text("id,a\n" + "".join(f"{i},{i % 10}\n" for i in range(rows)) + f"{rows},oops\n")
    return path


def test_failing_privatize_to_stdout_writes_nothing_there_cli(d):
    src = _late_error_csv(d / "late.csv")
    tmpdir = d / "systmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    proc = _cli("privatize", src, "-m", d / "mech.json", "-c", "a", "-o", "-", "--batch-size", "1000", cwd=d, env=env)
    lines = [line for line in proc.stderr.decode().splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "row 20001" in lines[0] and "oops" not in lines[0]
    assert proc.stdout == b""  # streaming used to have printed 20,000 rows here
    assert list(tmpdir.iterdir()) == []
    # the same input on stdin
    proc = _cli("privatize", "-", "-m", d / "mech.json", "-c", "a", "-o", "-", "--batch-size", "1000",
                stdin=src.read_bytes(), cwd=d, env=env)
    assert proc.returncode == 2 and proc.stdout == b"" and list(tmpdir.iterdir()) == []


def test_failing_privatize_to_stdout_writes_nothing_there_library(d, monkeypatch, private_tmpdir):
    src = _late_error_csv(d / "late.csv", rows=50)
    stdout = _Std()
    monkeypatch.setattr(sys, "stdout", stdout)
    with pytest.raises(ValueError, match=r"row 51 \(line 52\): column 'a': the value is not an integer"):
        sio.privatize_file(src, "-", mechanism=d / "mech.json", column="a", batch_size=1)
    assert stdout.buffer.getvalue() == b""
    assert list(private_tmpdir.iterdir()) == []


def test_interrupted_privatize_to_stdout_writes_nothing_there(d, monkeypatch, private_tmpdir):
    stdout = _Std()
    monkeypatch.setattr(sys, "stdout", stdout)

    def progress(rows, fraction):
        if rows >= 100:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sio.privatize_file(d / "ab.csv", "-", mechanism=d / "mech.json", column="a", batch_size=10,
                           progress=progress)
    assert stdout.buffer.getvalue() == b""
    assert list(private_tmpdir.iterdir()) == []


def test_successful_privatize_to_stdout_is_complete(d, monkeypatch, private_tmpdir):
    stdout = _Std()
    monkeypatch.setattr(sys, "stdout", stdout)
    result = sio.privatize_file(d / "ab.csv", "-", mechanism=d / "mech.json", column="a", batch_size=7, rng=3)
    reference = d / "ref.csv"
    sio.privatize_file(d / "ab.csv", reference, mechanism=d / "mech.json", column="a", batch_size=7, rng=3)
    assert result.rows == 200 and stdout.buffer.getvalue() == reference.read_bytes()
    assert list(private_tmpdir.iterdir()) == []


def test_unusable_temporary_directory_is_a_clear_error(d, monkeypatch, tmp_path):
    stdout = _Std()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=r"cannot write output '-': cannot create the temporary file in "
                                         r"'.*missing'"):
        sio.privatize_file(d / "ab.csv", "-", mechanism=d / "mech.json", column="a", rng=1)
    assert stdout.buffer.getvalue() == b""


def test_a_stale_spark_directory_of_a_dead_run_is_removed(tmp_path):
    # save_parquet's hidden directory, left by a run killed outright: removed by the next run to that target
    stale = tmp_path / ".out.sparseldp-999999999-deadbeef.tmp"
    (stale / "_temporary").mkdir(parents=True)
    (stale / "_temporary" / "part-0.parquet").write_bytes(b"x")
    live = tmp_path / f".out.sparseldp-{os.getpid()}-deadbeef.tmp"  # a run in progress: left alone
    live.mkdir()
    other = tmp_path / ".other.sparseldp-999999999-deadbeef.tmp"  # another target's: left alone
    other.mkdir()
    assert _files.clean_stale(tmp_path / "out") == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_replacing_an_output_keeps_its_permission_bits(d, capsys):
    """A 0o600 output replaced by privatize (or any writer) stays 0o600: the copied columns are not made
    readable by everyone."""

    out = d / "o.csv"
    out.write_text("old\n")
    out.chmod(0o600)
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", out)
    assert rc == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text() != "old\n"
    new = d / "new.csv"
    old_umask = os.umask(0o022)
    try:
        rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", new)
    finally:
        os.umask(old_umask)
    assert rc == 0 and stat.S_IMODE(new.stat().st_mode) == 0o644  # a new file: 0o666 less the umask
