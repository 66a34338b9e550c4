"""Prometheus metrics of Loom's daemons (`prometheus_client`, its process-wide registry).

The API server serves `/metrics` on its own port; a controller serves it on `--metrics
HOST:PORT` (`serve`), as Prometheus exporters do. What every controller exports, by
`component` (`logical` or `physical`):

- `loom_controller_pass_seconds{component,controller,phase}` (histogram): where each
  pass's time went, by phase (`observe_pass`; the phases of the controller's pass log),
  `total` included;
- `loom_controller_generation{component,controller}`: the configuration generation last
  computed;
- `loom_cluster_member{component,controller,state}`: 1 for the ZooKeeper membership state
  the controller is in (`joining`, `acquired`, `suspended`, `lost`, `closed`; none without
  ZooKeeper), and `loom_cluster_shards{component,controller,role}` the shards it masters
  and stands by for (`cluster_samples`, read at each scrape through `watch`);
- `loom_native_memory_bytes{component,controller}`: what the process's native allocator
  holds -- the rule engine's rows and arrangements (`native_memory_samples`); the process's
  resident memory less this is mostly its Python objects (`process_resident_memory_bytes`).

The physical controller adds nodes connected and mastered, and each mastered node's flows
(`loom_physical_*`, in `loom_physical.controller`); the API server its requests by route
and status, and the generations (`loom_api.metrics`).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from loom_common import httpd
from loom_common.ovsdb import reachable

PASS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                60.0, 120.0)  # fmt: skip
"""Seconds: a port change's pass is milliseconds, a cold start's minutes."""

PASS_SECONDS = Histogram("loom_controller_pass_seconds", "A controller pass's time, by phase",
                         ["component", "controller", "phase"], buckets=PASS_BUCKETS)  # fmt: skip
GENERATION = Gauge("loom_controller_generation",
                   "The configuration generation the controller last computed",
                   ["component", "controller"])  # fmt: skip


def observe_pass(component: str, controller: str, phases: Mapping[str, float],
                 generation: int) -> None:  # fmt: skip
    """Record one pass: its seconds by phase (`total` if the mapping has it), and the
    generation it computed."""
    for phase, seconds in phases.items():
        PASS_SECONDS.labels(component, controller, phase).observe(seconds)
    GENERATION.labels(component, controller).set(generation)


Sample = tuple[str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]
"""One gauge read at a scrape: (name, help, label names, [(label values, value)])."""


class _Live(Collector):
    """Gauges read at each scrape from the live objects of this process (`watch`): a
    process may run several controllers (tests do), so one collector serves them all."""

    def __init__(self) -> None:
        self.sources: dict[tuple[str, str], Callable[[], list[Sample]]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families: dict[str, GaugeMetricFamily] = {}
        for source in list(self.sources.values()):
            for name, text, labels, samples in source():
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(name, text, labels=list(labels))
                for values, value in samples:
                    family.add_metric(list(values), value)
        yield from families.values()


_LIVE = _Live()
REGISTRY.register(_LIVE)


def watch(component: str, controller: str, source: Callable[[], list[Sample]]) -> None:
    """Read `source` at every scrape (until `forget`)."""
    _LIVE.sources[(component, controller)] = source


def forget(component: str, controller: str) -> None:
    """Stop reading what `watch` registered."""
    _LIVE.sources.pop((component, controller), None)


STATES = ("joining", "acquired", "suspended", "lost", "closed")
"""The ZooKeeper membership states (`loom_common.cluster.membership.Ownership`)."""


def native_memory_samples(component: str, controller: str, held: int) -> list[Sample]:
    """The bytes the process's native allocator holds (`loom_ddlog.allocator_memory`)."""
    return [
        ("loom_native_memory_bytes",
         "Bytes the native allocator holds: the rule engine's rows and arrangements",
         ("component", "controller"), [((component, controller), held)]),
    ]  # fmt: skip


def cluster_samples(component: str, controller: str, view: Any) -> list[Sample]:
    """A controller's membership (`MemberView`, or None without ZooKeeper) as gauges."""
    if view is None:
        return []
    state = view.state.name.lower()
    labels = (component, controller)
    return [
        ("loom_cluster_member", "1 for the controller's ZooKeeper membership state",
         ("component", "controller", "state"),
         [((*labels, name), float(name == state)) for name in STATES]),
        ("loom_cluster_shards", "Shards the controller masters or stands by for",
         ("component", "controller", "role"),
         [((*labels, "master"), len(view.masters)), ((*labels, "standby"), len(view.standbys))]),
    ]  # fmt: skip


def serve(address: str) -> tuple[str, int]:
    """Serve `/metrics` (and the daemon's other routes: `loom_common.httpd`) on `HOST:PORT`
    (PORT 0: a free one) from a daemon thread; the address bound.

    Raises:
        ValueError: not HOST:PORT.
        OSError: the port cannot be bound.
    """
    return httpd.serve(address)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A daemon's `--metrics HOST:PORT`."""
    parser.add_argument("--metrics", metavar="HOST:PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics")  # fmt: skip


def serve_from_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace,
                         log: logging.Logger) -> str | None:  # fmt: skip
    """Serve the metrics where `--metrics` says (a usage error if it cannot); the
    endpoint's base URL (None without `--metrics`)."""
    if not args.metrics:
        return None
    try:
        host, port = serve(args.metrics)
    except (OSError, ValueError) as exc:
        parser.error(f"--metrics {args.metrics}: {exc}")
    url = f"http://{reachable(host)}:{port}"
    log.info("metrics at %s/metrics", url)
    return url
