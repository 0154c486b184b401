"""The core: kernels, mechanisms on Z, exact accounting and the paper's bounds (numpy and scipy only).

* :mod:`.kernels` - the declared kernel interface (:class:`~.kernels.Kernel`) and
  its implementations: discrete Laplace, Gaussian (log-concave, closed forms)
  and the general kernel ``w(d)`` (Definition 1 as written).
* :mod:`.accounting` - exact separation defects ``delta_h``, their split into
  support leakage and overlap (Remark 2), ``delta_star``, ``epsilon``, with
  rigorous upper/lower bounds (Theorems 3 and 9).
* :mod:`.bounds` - the paper's closed-form bounds (Theorems 4, 5, 10, 11,
  Corollaries 1, 2, 4, Proposition 2).
* :mod:`.mechanisms`, :mod:`.kernel_mechanism` - the s-sparse mechanisms on Z
  (Definitions 6 and 13, and the general kernel), frozen validated values.
* :mod:`.families` - the family registry; :mod:`.protocol` - the
  local-randomizer protocol every mechanism and channel honours.

Layering (tests/test_layers.py): kernels < accounting, bounds < (sampling,
channel) < mechanisms < families, kernel_mechanism.
"""
