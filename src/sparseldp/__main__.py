"""``python -m sparseldp``: the command line (same as the ``sparseldp`` script)."""

from ._entry import main

main()
