"""Hypothesis profiles for the property suite.

* ``ci`` (the default): sized so that the whole property suite runs in well under three minutes
  on two cores, both backends included; derandomized, so a CI run is reproducible.
* ``thorough``: many more examples, random seeds; for a long local run::

      HYPOTHESIS_PROFILE=thorough .venv/bin/pytest tests/property

No deadline in either: a slow example on a loaded machine is not a failure.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=3000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
