"""The NVP workload generator: the reference scales exactly, other scales in shape, the CLI."""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loom_lab import workload
from loom_lab.workload import generate

LOOM_WORKLOAD = Path(sys.executable).parent / "loom-workload"

# sha256 of json.dumps(doc, separators=(",", ":")) of the reference files nvp-scale-0.1.json.gz
# and nvp-scale-1.0.json.gz (seed 1), computed from those files when the generator was written.
REFERENCE_SHA256 = {
    0.1: "f4ef4582cd4a564046a7990e14325ec03846467f10f1fee94dcf18d66259cd4e",
    1.0: "57221e5900cdeeca380db94487a0cb4faad6acf8e983148b4a6573b29b28edab",
}
# (hypervisors, switches, ports, ACL rows) of the reference files.
REFERENCE_COUNTS = {0.1: (300, 700, 6300, 5229), 1.0: (3000, 7000, 63000, 52294)}


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=False, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def reference_docs() -> dict[float, dict[str, Any]]:
    return {scale: generate(scale) for scale in REFERENCE_SHA256}


def _ports(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [port for switch in doc["switches"] for port in switch["ports"]]


def _acls(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [acl for switch in doc["switches"] for acl in switch["acls"]]


def _check_shape(doc: dict[str, Any], scale: float) -> None:
    """Assert the workload's invariants at `scale`, whatever the seed."""
    n_hv, n_sw = round(3000 * scale), round(7000 * scale)
    hypervisors, switches, ports = doc["hypervisors"], doc["switches"], _ports(doc)
    assert list(doc) == ["scale", "seed", "hypervisors", "switches"]
    assert doc["scale"] == scale
    assert [hv["name"] for hv in hypervisors] == [f"hv{n}" for n in range(1, n_hv + 1)]
    assert all(hv["encap"] == "geneve" for hv in hypervisors)
    assert len({hv["ip"] for hv in hypervisors}) == n_hv
    assert [sw["name"] for sw in switches] == [f"ls{j}" for j in range(n_sw)]
    # Every hypervisor has exactly its 21 VIFs.
    per_hv = collections.Counter(port["hypervisor"] for port in ports)
    assert per_hv == {hv["name"]: 21 for hv in hypervisors}
    sizes = [len(sw["ports"]) for sw in switches]
    assert sum(sizes) == len(ports) == 21 * n_hv
    assert min(sizes) == 2
    assert max(sizes) == 64
    assert len({port["name"] for port in ports}) == len(ports)
    assert len({port["mac"] for port in ports}) == len(ports)
    for sw in switches:
        j = int(sw["name"][2:])
        assert sw["subnet"] == f"10.{j >> 8}.{j & 255}.0/24"
        for k, port in enumerate(sw["ports"]):
            assert port["name"] == f"ls{j}-p{k}"
            assert port["ip"] == f"10.{j >> 8}.{j & 255}.{k + 2}"
        kinds = [acl["kind"] for acl in sw["acls"]]
        assert kinds in (
            ["port"] * len(kinds),
            ["port"] * (len(kinds) - 2) + ["isolation", "isolation"],
        )
    acls = _acls(doc)
    port_acls = [acl for acl in acls if acl["kind"] == "port"]
    isolation = [acl for acl in acls if acl["kind"] == "isolation"]
    assert len(port_acls) == round(49188 * scale)
    assert len(isolation) == 2 * round(1553 * scale)
    assert len({acl["match"] for acl in port_acls}) == len(port_acls)
    assert {(acl["priority"], acl["action"]) for acl in isolation} == {
        (1000, "allow"),
        (900, "drop"),
    }


@pytest.mark.parametrize("scale", sorted(REFERENCE_SHA256))
def test_reference_content(reference_docs: dict[float, dict[str, Any]], scale: float) -> None:
    digest = hashlib.sha256(_canonical(reference_docs[scale])).hexdigest()
    assert digest == REFERENCE_SHA256[scale]


@pytest.mark.parametrize("scale", sorted(REFERENCE_COUNTS))
def test_reference_counts(reference_docs: dict[float, dict[str, Any]], scale: float) -> None:
    doc = reference_docs[scale]
    counts = (len(doc["hypervisors"]), len(doc["switches"]), len(_ports(doc)), len(_acls(doc)))
    assert counts == REFERENCE_COUNTS[scale]
    assert doc["seed"] == 1


@pytest.mark.parametrize("scale", sorted(REFERENCE_SHA256))
def test_reference_shape(reference_docs: dict[float, dict[str, Any]], scale: float) -> None:
    _check_shape(reference_docs[scale], scale)


def test_reference_spot_checks(reference_docs: dict[float, dict[str, Any]]) -> None:
    small, full = reference_docs[0.1], reference_docs[1.0]
    assert [len(sw["ports"]) for sw in small["switches"][:5]] == [4, 23, 6, 2, 4]
    assert [len(sw["ports"]) for sw in full["switches"][:5]] == [4, 49, 18, 4, 6]
    assert [p["hypervisor"] for p in small["switches"][0]["ports"]] == [
        "hv124",
        "hv127",
        "hv99",
        "hv142",
    ]
    assert [p["hypervisor"] for p in full["switches"][0]["ports"]] == [
        "hv2313",
        "hv446",
        "hv445",
        "hv2702",
    ]
    assert [sw["name"] for sw in full["switches"] if len(sw["ports"]) == 64] == ["ls6335"]
    assert full["switches"][-1]["ports"][-1] == {
        "name": "ls6999-p4",
        "mac": "0a:00:00:00:f6:17",
        "ip": "10.27.87.6",
        "hypervisor": "hv2112",
    }
    isolated = [
        sw["name"]
        for sw in small["switches"]
        if any(acl["kind"] == "isolation" for acl in sw["acls"])
    ]
    assert isolated[:3] == ["ls4", "ls9", "ls13"]
    ips = [hv["ip"] for hv in full["hypervisors"]]
    assert ips[0] == "192.0.2.1"
    assert ips[253:255] == ["192.0.2.254", "198.51.100.1"]
    assert ips[508] == "203.0.113.1"
    assert ips[762] == "2001:db8::2fb"
    assert ips[-1] == "2001:db8::bb8"


def test_reference_acl_text(reference_docs: dict[float, dict[str, Any]]) -> None:
    acls = reference_docs[0.1]["switches"][4]["acls"]
    assert acls[0] == {
        "direction": "to-lport",
        "priority": 1001,
        "match": 'outport == "ls4-p0" && ip4 && tcp.dst == {22, 80, 443}',
        "action": "allow",
        "kind": "port",
    }
    assert acls[-2:] == [
        {
            "direction": "to-lport",
            "priority": 1000,
            "match": "ip4 && ip4.src == 10.0.4.0/24",
            "action": "allow",
            "kind": "isolation",
        },
        {
            "direction": "to-lport",
            "priority": 900,
            "match": "ip4",
            "action": "drop",
            "kind": "isolation",
        },
    ]


@pytest.mark.parametrize("scale", [0.02, 0.25, 0.5])
def test_other_scales(scale: float) -> None:
    doc = generate(scale)
    _check_shape(doc, scale)
    assert len(doc["hypervisors"]) == round(3000 * scale)
    assert len(doc["switches"]) == round(7000 * scale)
    assert len(_ports(doc)) == 21 * round(3000 * scale)
    # The same random choices give the same document.
    assert generate(scale) == doc


@pytest.mark.parametrize("seed", [2, 12345])
def test_seed_changes_the_output(seed: int) -> None:
    doc = generate(0.02, seed=seed)
    _check_shape(doc, 0.02)
    assert doc["seed"] == seed
    reference = generate(0.02)
    assert doc["switches"] != reference["switches"]
    assert doc["hypervisors"] == reference["hypervisors"]


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), 0.001, 10.0])
def test_bad_scales_are_refused(scale: float) -> None:
    with pytest.raises(ValueError, match="scale"):
        generate(scale)


def test_hypervisor_ip() -> None:
    assert workload.hypervisor_ip(1) == "192.0.2.1"
    assert workload.hypervisor_ip(255) == "198.51.100.1"
    assert workload.hypervisor_ip(762) == "203.0.113.254"
    assert workload.hypervisor_ip(763) == "2001:db8::2fb"


def test_cli_gzip_and_plain(tmp_path: Path) -> None:
    expected = generate(0.02, seed=3)
    assert workload.main(["--scale", "0.02", "--seed", "3", "--out", str(tmp_path / "w.gz")]) == 0
    assert workload.main(["--scale", "0.02", "--seed", "3", "--out", str(tmp_path / "w.json")]) == 0
    with gzip.open(tmp_path / "w.gz") as f:
        assert json.load(f) == expected
    assert json.loads((tmp_path / "w.json").read_bytes()) == expected
    # No timestamp in the gzip header: the same workload gives the same file.
    assert workload.main(["--scale", "0.02", "--seed", "3", "--out", str(tmp_path / "x.gz")]) == 0
    assert (tmp_path / "x.gz").read_bytes() == (tmp_path / "w.gz").read_bytes()


def test_cli_refuses_a_bad_scale(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert workload.main(["--scale", "0", "--out", str(tmp_path / "w.json")]) == 2
    assert "scale" in capsys.readouterr().err
    assert not (tmp_path / "w.json").exists()


def test_console_script_writes_stdout() -> None:
    out = subprocess.run(
        [str(LOOM_WORKLOAD), "--scale", "0.02", "--out", "-"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    assert out == workload.dumps(generate(0.02))
