"""``python -m sparseldp.cli``: the command line (``python -m sparseldp`` is the same, with a word on the extra)."""

from . import _entry

_entry()
