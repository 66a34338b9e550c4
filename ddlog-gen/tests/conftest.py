"""Shared fixtures and Hypothesis profiles for the binding tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from loom_ddlog import Program

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "ddlog-gen" / "examples"

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") == "true" else "dev")
)


@pytest.fixture
def l2switch() -> Program:
    """The example L2 switch program (keyed Port, unions, Option, group_by, negation)."""
    return Program.load(EXAMPLES / "l2switch.dl")


@pytest.fixture
def reach() -> Program:
    """The example transitive-closure program."""
    return Program.load(EXAMPLES / "reach.dl")
