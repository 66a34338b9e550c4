"""The API server's `/metrics` (Prometheus text) and its audit log."""

from __future__ import annotations

import http.client
import logging
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

#: What Prometheus's text format (0.0.4 and 1.0.0) is served as.
PROMETHEUS_TEXT = "text/plain"


def media_type(value: str) -> tuple[str, dict[str, str]]:
    """Parse a Content-Type strictly (RFC 9110 §8.3.1): the type and its parameters; a
    parameter given twice, an empty one or one without a value is refused, as strict
    parsers (Prometheus 3's, Go's `mime.ParseMediaType`) refuse it.

    Raises:
        AssertionError: a malformed or repeated parameter.
    """
    kind, *params = (part.strip() for part in value.split(";"))
    assert "/" in kind.strip("/"), value
    found: dict[str, str] = {}
    for param in params:
        name, sep, val = param.partition("=")
        assert sep, f"parameter {param!r} without a value in {value!r}"
        assert name.strip(), f"parameter {param!r} without a name in {value!r}"
        assert val.strip(), f"parameter {param!r} with an empty value in {value!r}"
        key = name.strip().lower()
        assert key not in found, f"parameter {key!r} repeated in {value!r}"
        found[key] = val.strip().strip('"')
    return kind.lower(), found


def _samples(client: ApiClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.get_data(as_text=True))
            for s in family.samples}  # fmt: skip


def _count(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], method: str,
           route: str, status: str) -> float:  # fmt: skip
    key = ("loom_api_requests_total",
           (("method", method), ("route", route), ("status", status)))  # fmt: skip
    return samples.get(key, 0.0)


def test_requests_are_counted_by_route_and_status_and_generations_shown(
    admin: ApiClient, anonymous: ApiClient
) -> None:
    before = _samples(anonymous)  # (no token needed)
    switch = admin.create("/api/v1/logical-switches", {"name": "web", "tenant": "t"})
    admin.get(f"/api/v1/logical-switches/{switch['id']}")
    admin.get("/api/v1/logical-switches/00000000-0000-0000-0000-000000000000")
    anonymous.get("/api/v1/logical-switches")
    after = _samples(anonymous)
    one = "/api/v1/logical-switches/<ident>"
    growth = {
        ("POST", "/api/v1/logical-switches", "201"): 1,
        ("GET", one, "200"): 1,
        ("GET", one, "404"): 1,
        ("GET", "/api/v1/logical-switches", "401"): 1,
    }
    for (method, route, status), n in growth.items():
        assert _count(after, method, route, status) - _count(before, method, route, status) == n
    latency = ("loom_api_request_seconds_count",
               (("method", "POST"), ("route", "/api/v1/logical-switches")))  # fmt: skip
    assert after[latency] >= 1
    config = after[("loom_api_generation", (("kind", "config"),))]
    assert config >= 1
    assert ("loom_api_generation", (("kind", "realized"),)) in after


def test_every_acknowledged_write_is_audited_once(
    admin: ApiClient, tenant_a: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loom.audit")
    switch = tenant_a.create("/api/v1/logical-switches", {"name": "web"})
    admin.patch(f"/api/v1/logical-switches/{switch['id']}", {"description": "x"})
    tenant_a.post("/api/v1/logical-switches", {"name": 5})  # refused: not audited
    admin.get("/api/v1/logical-switches")  # a read: not audited
    lines = [r.getMessage() for r in caplog.records if r.name == "loom.audit"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("tenant tenant-a POST /api/v1/logical-switches -> 201, generation ")
    assert lines[1].startswith(f"admin PATCH /api/v1/logical-switches/{switch['id']} -> 200")


def scrape(port: int) -> list[Any]:
    """GET /metrics on 127.0.0.1:`port` as a strict scraper would: one Content-Type,
    Prometheus's text format 1.0.0 in UTF-8 with no repeated parameter; the metric
    families, parsed by Prometheus's own client parser."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read().decode()
        values = response.headers.get_all("Content-Type")
    finally:
        conn.close()
    assert response.status == 200
    assert values is not None
    assert len(values) == 1, values
    assert media_type(values[0]) == (PROMETHEUS_TEXT, {"version": "1.0.0", "charset": "utf-8"})
    return list(text_string_to_metric_families(body))


def test_metrics_over_http_have_one_standard_content_type(live_api: str) -> None:
    names = {family.name for family in scrape(int(live_api.rsplit(":", 1)[1]))}
    assert {"loom_api_requests", "loom_api_generation"} <= names


@pytest.fixture
def controller_httpd() -> Iterator[int]:
    """The controllers' HTTP endpoint (`loom_common.httpd`'s handler) on a free loopback
    port, shut down at teardown; yields the port."""
    from loom_common import httpd

    server = ThreadingHTTPServer(("127.0.0.1", 0), httpd._Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_controllers_metrics_have_one_standard_content_type(controller_httpd: int) -> None:
    assert scrape(controller_httpd)  # (this process's metrics)
