"""Incremental equals recompute: random sequences of configuration changes, made through the
API one at a time and processed incrementally by a running controller, leave the universal
database exactly as a fresh controller computes it from the final configuration."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from loom_api.testing import ApiClient
from loom_common.ovsdb import OvsdbServer
from loom_logical import controller as controller_module
from loom_logical.controller import LogicalController

STEPS = 60
HOSTS = ("hv1", "hv2", "hv3")
RULE_SHAPES: list[dict[str, Any]] = [
    {
        "direction": "ingress",
        "ethertype": "IPv4",
        "protocol": "tcp",
        "port_range_min": 22,
        "port_range_max": 22,
    },
    {
        "direction": "ingress",
        "ethertype": "IPv4",
        "protocol": "tcp",
        "port_range_min": 1000,
        "port_range_max": 2047,
        "remote_prefix": "10.0.0.0/8",
    },
    {"direction": "egress", "ethertype": "IPv4"},
    {"direction": "ingress", "ethertype": "IPv6", "protocol": "udp"},
    {"direction": "ingress", "ethertype": "IPv4", "protocol": "icmp"},
]


def _table_rows(remote: str, dump: Callable[[str], dict[str, list[dict[str, Any]]]]) -> Any:
    """The universal DB's rows without their uuids (what two controllers can agree on)."""
    out = {}
    for table, rows in dump(remote).items():
        if table in ("Logical_Controller", "Universal_Global", "Shard"):
            continue
        out[table] = sorted(
            repr(sorted((k, v) for k, v in row.items() if k not in ("_uuid", "_version")))
            for row in rows
        )
    return out


class RandomConfig:
    """Makes random valid-or-refused API changes, keeping a model of what exists."""

    def __init__(self, admin: ApiClient, rng: random.Random) -> None:
        self.admin = admin
        self.rng = rng
        self.switches: list[str] = []
        self.ports: dict[str, str] = {}  # port -> switch
        self.profiles: list[str] = []
        self.routers: list[str] = []
        self.subnet = 0
        self.generation = 0

    def _send(self, method: str, path: str, body: Any = None) -> dict[str, Any] | None:
        response = self.admin._send(method, "/api/v1/" + path, body, {})
        assert response.status_code < 500, (method, path, body, response.get_json())
        if "X-Loom-Config-Generation" in response.headers:
            self.generation = max(
                self.generation, int(response.headers["X-Loom-Config-Generation"])
            )
        if response.status_code >= 400 or response.status_code == 204:
            return None
        result: dict[str, Any] = response.get_json()
        return result

    def mac(self) -> str:
        return "02:00:" + ":".join(f"{self.rng.randrange(256):02x}" for _ in range(4))

    def ips(self) -> list[str]:
        ips = [f"10.{self.rng.randrange(4)}.{self.rng.randrange(256)}.{self.rng.randrange(1, 255)}"]
        if self.rng.random() < 0.3:
            ips.append(f"2001:db8::{self.rng.randrange(1, 65535):x}")
        return ips

    def step(self) -> tuple[str, str] | None:
        """One random change; returns (port id, host) when it moved a VIF, else None."""
        name = self.rng.choice(OPS)
        if not self.switches:
            name = "switch"
        op: Callable[[], tuple[str, str] | None] = getattr(self, f"op_{name}")
        return op()

    def op_switch(self) -> None:
        made = self._send(
            "POST",
            "logical-switches",
            {
                "name": f"s{len(self.switches)}",
                "tenant": "t",
                "replication_mode": self.rng.choice(["source", "service-node", None]),
            },
        )
        if made:
            self.switches.append(made["id"])

    def op_port(self) -> None:
        sw = self.rng.choice(self.switches)
        k = min(len(self.profiles), self.rng.randrange(3))
        made = self._send(
            "POST",
            f"logical-switches/{sw}/ports",
            {
                "name": f"p{len(self.ports)}",
                "mac": self.mac(),
                "ips": self.ips(),
                "port_security": self.rng.random() < 0.7,
                "security_profile_ids": self.rng.sample(self.profiles, k=k),
                "attachment": {"type": "vif", "vif_id": f"vif{self.rng.randrange(10**6)}"},
            },
        )
        if made:
            self.ports[made["id"]] = sw

    def op_update(self) -> None:
        if not self.ports:
            return
        port = self.rng.choice(list(self.ports))
        body: dict[str, Any] = self.rng.choice(
            [
                {"ips": self.ips()},
                {"mac": self.mac()},
                {"admin_state_up": self.rng.random() < 0.5},
                {"port_security": self.rng.random() < 0.5},
                {
                    "security_profile_ids": self.rng.sample(
                        self.profiles, k=min(1, len(self.profiles))
                    )
                },
            ]
        )
        self._send("PATCH", f"logical-switches/{self.ports[port]}/ports/{port}", body)

    def op_delete_port(self) -> None:
        if self.ports:
            port = self.rng.choice(list(self.ports))
            self._send("DELETE", f"logical-switches/{self.ports.pop(port)}/ports/{port}")

    def op_profile(self) -> None:
        rules = self.rng.sample(RULE_SHAPES, k=self.rng.randrange(1, 3))
        if self.profiles and self.rng.random() < 0.5:
            rules.append(
                {
                    "direction": "ingress",
                    "ethertype": "IPv4",
                    "remote_profile_id": self.rng.choice(self.profiles),
                }
            )
        made = self._send(
            "POST",
            "security-profiles",
            {
                "name": f"sp{len(self.profiles)}",
                "tenant": "t",
                "stateful": self.rng.random() < 0.7,
                "rules": rules,
            },
        )
        if made:
            self.profiles.append(made["id"])

    def op_delete_profile(self) -> None:
        if self.profiles:
            sp = self.rng.choice(self.profiles)
            response = self.admin.delete(f"/api/v1/security-profiles/{sp}")
            assert response.status_code in (204, 409), response.get_json()  # 409: in use
            if response.status_code == 204:
                self.generation = max(
                    self.generation, int(response.headers["X-Loom-Config-Generation"])
                )
                self.profiles.remove(sp)

    def op_router(self) -> None:
        made = self._send(
            "POST", "logical-routers", {"name": f"r{len(self.routers)}", "tenant": "t"}
        )
        if made:
            self.routers.append(made["id"])

    def op_router_port(self) -> None:
        if not self.routers:
            return
        self.subnet += 1
        prefix = f"172.{16 + self.subnet // 256}.{self.subnet % 256}.1/24"
        self._send(
            "POST",
            f"logical-routers/{self.rng.choice(self.routers)}/ports",
            {
                "name": f"rp{self.subnet}",
                "ip_prefix": prefix,
                "logical_switch_id": self.rng.choice(self.switches),
                "mac": self.mac(),
            },
        )

    def op_locate(self) -> tuple[str, str] | None:
        if not self.ports:
            return None
        return self.rng.choice(list(self.ports)), self.rng.choice(HOSTS)

    def op_delete_switch(self) -> None:
        sw = self.rng.choice(self.switches)
        response = self.admin.delete(f"/api/v1/logical-switches/{sw}")
        assert response.status_code in (204, 409), response.get_json()
        if response.status_code == 204:
            self.generation = max(
                self.generation, int(response.headers["X-Loom-Config-Generation"])
            )
            self.switches.remove(sw)


OPS = (
    "switch",
    "port",
    "port",
    "port",
    "update",
    "delete_port",
    "profile",
    "delete_profile",
    "router",
    "router_port",
    "locate",
    "locate",
    "delete_switch",
)


@pytest.mark.ovs
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_equals_recompute(
    seed: int,
    admin: ApiClient,
    controller: LogicalController,
    config_db: OvsdbServer,
    universal_db: OvsdbServer,
    universal_db_2: OvsdbServer,
    scenario: Any,
    dump: Callable[[str], dict[str, list[dict[str, Any]]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    changes = RandomConfig(admin, random.Random(seed))
    for node in ("sn1", "sn2"):
        admin.post(
            "/api/v1/transport-nodes",
            {"name": node, "node_type": "service-node", "system_id": node},
        )
    runner = scenario([])
    before = controller.transactions
    for _ in range(STEPS):  # each change is its own engine transaction: wait for each
        moved = changes.step()
        assert controller.wait_generation(changes.generation, 30) >= changes.generation
        if moved:
            runner.locate(*moved)
    assert controller.transactions - before >= STEPS // 2

    # The fresh controller streams its cold start's output to the database in small chunks
    # (`Writer.stream`; at the default threshold only large transactions do).
    monkeypatch.setattr(controller_module, "STREAM_CHUNK", 37)
    fresh = LogicalController(
        config_db.remote, universal_db_2.remote, name="fresh", stream_from=1
    ).start()
    try:
        assert fresh.wait_generation(changes.generation, 30) >= changes.generation
        assert fresh.streamed >= 1
        # Physical controllers would report the VIFs to the fresh DB as they did to the first.
        located = {
            r["logical_port"]: r["chassis"]
            for r in dump(universal_db.remote)["Port_Binding"]
            if isinstance(r["chassis"], str)
        }
        fresh_runner = type(runner)(admin, fresh, universal_db_2, config_db)
        for port, host in located.items():
            fresh_runner.locate(port, host)
        incremental = _table_rows(universal_db.remote, dump)
        recomputed = _table_rows(universal_db_2.remote, dump)
    finally:
        fresh.stop()
    assert incremental.keys() == recomputed.keys()
    for table in incremental:
        assert incremental[table] == recomputed[table], table
    assert len(incremental["Universal_Flow"]) > 100
