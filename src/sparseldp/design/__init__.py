"""Design from a target: the smallest feasible support and the distortion-optimal parameter.

* :mod:`.radius` - mechanisms on Z: :func:`smallest_support` (exact, by a
  proven monotonicity lemma) and :func:`design` (joint optimum), each with a
  certificate (Theorems 6 and 12: the smallest feasible support is optimal);
  ``H`` up to :data:`MAX_H_DESIGN`.
* :mod:`.finite` - finite input domains with extended or clipped windows,
  accounted with the general Theorems 2 and 8 (:func:`design_finite`), and the
  baselines calibrated to the same target (:func:`calibrate`).
* :mod:`._search` - the shared one-dimensional searches (bracketed crossing,
  Brent's minimization, monotone search on the radius, the radius scan).

Both return one result type, :class:`Design`.
"""

from .finite import Calibration, calibrate, design_finite
from .radius import MAX_H_DESIGN, Design, design, smallest_support

__all__ = ["Design", "design", "smallest_support", "design_finite", "calibrate", "Calibration", "MAX_H_DESIGN"]
