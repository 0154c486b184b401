"""The ``sparseldp`` console script, importable without the ``cli`` extra.

``pip install sparseldp`` installs the library only (numpy, scipy); the
command line needs ``pip install 'sparseldp[cli]'``.  Without it this entry
point says so in one line (exit status 2) instead of a traceback.
"""

from __future__ import annotations

import sys

_CLI_PACKAGES = ("typer", "rich")


def main() -> None:
    """Run the command line, or explain in one line which extra is missing."""
    missing = []
    for name in _CLI_PACKAGES:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        sys.stderr.write(
            f"error: the sparseldp command line needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; install the command-line extra: "
            "pip install 'sparseldp[cli]'\n"
        )
        sys.exit(2)
    from .cli import main as cli_main

    sys.exit(cli_main())
