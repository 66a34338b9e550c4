"""Counts the datalog-conformance cases and prints one summary line for them."""

from __future__ import annotations

import pytest

_COUNTS = {"passed": 0, "failed": 0, "not applicable": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "test_conformance.py::test_case" not in report.nodeid:
        return
    if report.when == "call" and report.passed:
        _COUNTS["passed"] += 1
    elif report.failed:
        _COUNTS["failed"] += 1
    elif report.skipped:
        _COUNTS["not applicable"] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if sum(_COUNTS.values()):
        terminalreporter.write_line(
            f"datalog-conformance: {_COUNTS['passed']} passed, {_COUNTS['failed']} failed, "
            f"{_COUNTS['not applicable']} not applicable"
        )
