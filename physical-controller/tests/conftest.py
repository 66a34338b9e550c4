"""Pytest configuration of the physical controller's tests: their shared rows
(`physical_rows`) are importable by the test modules (`--import-mode=importlib` puts no
test folder on `sys.path`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
