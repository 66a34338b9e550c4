"""The API server's metrics (`/metrics`, Prometheus text) and its audit log.

- `loom_api_requests_total{method,route,status}` and `loom_api_request_seconds{method,route}`
  (histogram): every request, by the route that matched (`/api/v1/logical-switches/<id>`,
  not the object's id: bounded label values) — `unmatched` for a path no route has;
- `loom_api_generation{kind}`: the configuration generation (`config`), the one the logical
  controllers computed (`logical`) and the one every node realized (`realized`), read from
  the config DB at each scrape; the lag is their difference;
- `loom_api_connections_closed_total{reason}`: connections the server closed by its
  connection limits (`idle_timeout`, `request_timeout`: answered 408, `made_room`: the
  quietest closed for a new one) or refused at once (`refused_per_client`: 429,
  `refused_server_full`: 503);
- the process's own (`process_*`, `python_*`: `prometheus_client`'s defaults).

`/metrics` needs no token, as Prometheus exporters do: it says how much and how fast, never
which objects. Every write the API acknowledges is logged once at INFO by the `loom.audit`
logger: the caller's tenant (or `admin`), the method, the path and the generation it
was acknowledged with.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from loom_api import errors, http
from loom_api.store import ReadView

audit = logging.getLogger("loom.audit")

REQUESTS = Counter("loom_api_requests_total", "API requests answered",
                   ["method", "route", "status"])  # fmt: skip
LATENCY = Histogram("loom_api_request_seconds", "API requests' time to answer",
                    ["method", "route"],
                    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                             5.0, 10.0))  # fmt: skip
GENERATION = Gauge("loom_api_generation",
                   "Configuration generations: written (config), computed (logical), "
                   "realized on every node (realized)", ["kind"])  # fmt: skip
CONNECTIONS_CLOSED = Counter("loom_api_connections_closed_total",
                             "Connections the server closed or refused by its connection "
                             "limits (loom_api.serving), by reason", ["reason"])  # fmt: skip
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def install(app: Flask) -> None:
    """Count and time every request of `app`, log each acknowledged write, and serve
    `/metrics`."""

    @app.before_request
    def started() -> None:
        g.loom_started = time.perf_counter()

    @app.after_request
    def answered(response: Response) -> Response:
        route = request.url_rule.rule if request.url_rule is not None else "unmatched"
        REQUESTS.labels(request.method, route, str(response.status_code)).inc()
        began = g.get("loom_started")
        if began is not None:
            LATENCY.labels(request.method, route).observe(time.perf_counter() - began)
        if request.method in WRITES and response.status_code < 400:
            _audit(response)
        return response

    @app.get("/metrics")
    def metrics() -> Response:
        def read(view: ReadView) -> tuple[int, int, int]:
            return view.generation(), view.logical_generation(), view.realized_generation()

        try:
            config, logical, realized = http.store().read(read)
        except errors.LoomApiError:
            pass  # the database is away: the generations keep their last values
        else:
            GENERATION.labels("config").set(config)
            GENERATION.labels("logical").set(logical)
            GENERATION.labels("realized").set(realized)
        # (content_type, not mimetype: Flask would add its own charset to the one it has.)
        return Response(generate_latest(), content_type=CONTENT_TYPE_LATEST)


def _audit(response: Response) -> None:
    """One line per acknowledged write: who, what, which generation."""
    try:
        caller = http.caller()
        who = "admin" if caller.is_admin else f"tenant {caller.tenant}"
    except errors.LoomApiError:
        who = "noauth"  # (the Neutron API without authentication)
    generation = response.headers.get(http.GENERATION_HEADER, "-")
    ids: dict[str, object] = {}
    if who.startswith("tenant "):
        ids["tenant"] = who.removeprefix("tenant ")
    if generation != "-":
        ids["generation"] = int(generation)
    audit.info("%s %s %s -> %s, generation %s", who, request.method, request.path,
               response.status_code, generation, extra={**ids, "object": request.path})  # fmt: skip
