"""Andromeda's workload shape (`loom_lab.andromeda`): large networks over a pool of hosts,
NVP's workload beside them unchanged, a heavy-tailed traffic matrix, the CLI."""

from __future__ import annotations

import collections
import ipaddress
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loom_lab import andromeda, workload

LOOM_WORKLOAD = Path(sys.executable).parent / "loom-workload"


def test_each_network_spans_exactly_its_hosts() -> None:
    doc = andromeda.generate([(2000, 300), (100, 400)], pool=500, seed=3)
    assert len(doc["hypervisors"]) == 500
    names = {h["name"] for h in doc["hypervisors"]}
    for net, (vms, hosts) in zip(doc["switches"], [(2000, 300), (100, 400)], strict=True):
        ports = net["ports"]
        assert len(ports) == vms
        used = collections.Counter(p["hypervisor"] for p in ports)
        assert len(used) == min(vms, hosts)
        assert set(used) <= names
        if vms >= hosts:  # (round-robin: every host has one, none more than one above)
            assert max(used.values()) - min(used.values()) <= 1
        subnet = ipaddress.IPv4Network(net["subnet"])
        assert all(ipaddress.IPv4Address(p["ip"]) in subnet for p in ports)
        assert net["acls"] == []
    ports = [p for net in doc["switches"] for p in net["ports"]]
    for key in ("name", "mac", "ip"):
        assert len({p[key] for p in ports}) == len(ports), f"a {key} given twice"
    subnets = [ipaddress.IPv4Network(net["subnet"]) for net in doc["switches"]]
    assert not subnets[0].overlaps(subnets[1])
    assert doc["networks"] == [{"switch": "net0", "vms": 2000, "hosts": 300},
                               {"switch": "net1", "vms": 100, "hosts": 400}]  # fmt: skip


def test_the_same_seed_gives_the_same_document_and_another_does_not() -> None:
    one = andromeda.generate([(500, 50)], seed=1)
    assert json.dumps(one) == json.dumps(andromeda.generate([(500, 50)], seed=1))
    assert json.dumps(one) != json.dumps(andromeda.generate([(500, 50)], seed=2))


def test_nvp_beside_is_nvp_unchanged() -> None:
    nvp = workload.generate(0.1)
    doc = andromeda.generate([(1000, 300)], scale=0.1)
    assert doc["switches"][: len(nvp["switches"])] == nvp["switches"]
    assert doc["hypervisors"] == nvp["hypervisors"]  # (the pool: NVP's 300 hypervisors)
    nvp_ips = {p["ip"] for s in nvp["switches"] for p in s["ports"]}
    big = doc["switches"][-1]
    assert not nvp_ips & {p["ip"] for p in big["ports"]}


def test_traffic_is_heavy_tailed_as_andromeda_measured() -> None:
    doc = andromeda.generate([(20_000, 1000)], peers=4, seed=5)
    pairs = doc["traffic"]
    assert len(pairs) == 80_000
    assert len({(t["from"], t["to"]) for t in pairs}) == len(pairs)
    assert all(t["from"] != t["to"] for t in pairs)
    heavy = sum(t["bps"] > andromeda.OFFLOAD_THRESHOLD_BPS for t in pairs) / len(pairs)
    assert 0.015 < heavy < 0.025, heavy  # (2% asked)
    rates = sorted(t["bps"] for t in pairs)
    top = sum(rates[-len(rates) // 50 :]) / sum(rates)
    assert top > 0.3, f"the heaviest 2% carry only {top:.0%}: not a heavy tail"
    silent = 1 - len(pairs) / (20_000 * 19_999)
    assert silent > 0.99


@pytest.mark.parametrize(("networks", "pool", "said"), [
    ([], None, "at least one network"),
    ([(1, 10)], None, "needs 2"),
    ([(100, 50)], 20, "1..20 hosts"),
    ([(5_000_000, 10)], None, "more addresses"),
])  # fmt: skip
def test_a_shape_that_cannot_be_is_refused(networks: list[tuple[int, int]], pool: int | None,
                                           said: str) -> None:  # fmt: skip
    with pytest.raises(ValueError, match=said):
        andromeda.generate(networks, pool=pool, peers=0)


def test_the_cli_writes_it_and_refuses_a_bad_network(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    done = subprocess.run([str(LOOM_WORKLOAD), "--andromeda", "300:40", "--andromeda", "50:10",
                           "--pool", "60", "--out", str(out)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc == andromeda.generate([(300, 40), (50, 10)], pool=60)
    bad = subprocess.run([str(LOOM_WORKLOAD), "--andromeda", "300x40", "--out", str(out)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert bad.returncode == 2
    assert "not VMS:HOSTS" in bad.stderr
    none = subprocess.run([str(LOOM_WORKLOAD), "--out", str(out)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert none.returncode == 2
    assert "--scale or --andromeda" in none.stderr
