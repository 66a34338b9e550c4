"""The pytest plugin's policy (skip locally, fail in CI) and its logs on failing reports."""

from __future__ import annotations

import pytest

from loom_common import testing

OVS_TEST = """
import pytest

@pytest.mark.ovs
def test_needs_ovs():
    pass

def test_plain():
    pass
"""

INI = """
[pytest]
markers = ovs: needs ovsdb-server
"""


@pytest.fixture
def no_ovs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend OVS is not installed, outside CI."""
    monkeypatch.setattr(testing, "missing_ovs_tools", lambda: ["ovsdb-server"])
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("LOOM_REQUIRE_INTEGRATION", raising=False)


@pytest.mark.usefixtures("no_ovs")
def test_missing_ovs_skips_ovs_tests_locally(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(OVS_TEST)
    result = pytester.runpytest_inprocess("-p", "loom_common.testing", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*ovsdb-server not installed (apt-get install openvswitch-*"])


@pytest.mark.usefixtures("no_ovs")
@pytest.mark.parametrize(("var", "value"), [("CI", "true"), ("LOOM_REQUIRE_INTEGRATION", "1")])
def test_missing_ovs_fails_ovs_tests_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    pytester.makeini(INI)
    pytester.makepyfile(OVS_TEST)
    result = pytester.runpytest_inprocess("-p", "loom_common.testing")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ovsdb-server not installed*"])


def test_failing_test_report_carries_registered_log_tails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from loom_common.testing import register_log

        @pytest.fixture
        def daemon_log(tmp_path, request):
            path = tmp_path / "daemon.log"
            path.write_text("".join(f"line {i}\\n" for i in range(100)))
            register_log(request, path)
            register_log(request, tmp_path / "never-written.log")
            return path

        def test_fails(daemon_log):
            assert False

        def test_passes(daemon_log):
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "loom_common.testing")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*- log *daemon.log -*", "line 60", "*line 99*"])
    assert "line 59\n" not in result.stdout.str()
    assert "never-written.log" not in result.stdout.str()
    assert result.stdout.str().count("daemon.log -") == 1  # only the failing test's report


def test_a_daemon_fixture_without_its_marker_fails_before_the_daemon_starts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a daemon was started")

    monkeypatch.setattr(testing, "serve_db", started)
    monkeypatch.setattr(testing, "ZooKeeperServer", started)
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import pytest

        def test_db(config_db):
            pass

        def test_zk(zk):
            pass

        @pytest.mark.zk
        def test_zk_marked_but_not_ovs(zk, universal_db):
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "loom_common.testing")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines_random([
        "*test_db uses config_db (a real daemon) but is not marked ovs*",
        "*test_zk uses zk (a real daemon) but is not marked zk*",
        "*test_zk_marked_but_not_ovs uses universal_db (a real daemon) but is not marked ovs*",
    ])  # fmt: skip
    result.stdout.no_fnmatch_line("*a daemon was started*")
