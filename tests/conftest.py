import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))  # tests/brute.py, the independent oracle

# CI runs a fixed, derandomized example sequence so a green run is reproducible;
# HYPOTHESIS_PROFILE=explore searches afresh (and longer) on a developer's machine.
settings.register_profile(
    "sparseldp", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "sparseldp"))
