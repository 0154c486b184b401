"""Running the command line in-process for the CLI tests: the exit status and the two streams."""

from sparseldp.cli import main


def run(capsys, *argv):
    """``main(argv)`` with every argument as a string: ``(exit status, stdout, stderr)``."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(capsys, *argv, quiet_stdout: bool = False) -> str:
    """Run, expect exit 2 with exactly one ``error:`` line on stderr (and with ``quiet_stdout`` nothing on
    stdout); return that line."""
    rc, out, err = run(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, err)
    if quiet_stdout:
        assert out == "", out
    return lines[0]
