"""Andromeda's workload shape (Dalton et al., NSDI 2018, §5.3, Figure 11), generated.

Where NVP's workload (`loom_lab.workload`) is many small switches, Andromeda's scaling test
is a few large networks: one network of n VMs scheduled on a fixed pool of hosts (Figure
11a: n from 1k to 100k on 10k hosts). A VM add in such a network is where the preprogrammed
model costs O(n * h) and the Hoverboard model does not.

`generate(networks, pool=...)` places each network's VMs over its own `h` hosts of the pool,
optionally beside NVP's workload at a scale (its switches unchanged, first), and draws a
synthetic traffic matrix for the offload experiments (Figure 11b/c): each VM talks to
`peers` others of its network on average and every other pair is silent (Andromeda: 84%
of pairs never talk); a talking pair's rate is Pareto-distributed with shape `alpha`, its
scale set so that a share `heavy` of the pairs (Andromeda: 2%) sends over 20 kbps.

The document has the NVP workload's keys, so the benchmarks load it the same way, and two
more: `"networks"` (each network's n, h and switch name) and `"traffic"`::

    {"shape": "andromeda", "seed": N, "scale": S or null, "pool": H,
     "hypervisors": [{"name": "hv1", "encap": "geneve", "ip": "192.0.2.1"}, ...],
     "switches": [... NVP's, then {"name": "net0", "subnet": "100.64.0.0/16",
                   "ports": [{"name": "net0-vm0", "mac": "0a:01:00:00:00:00",
                              "ip": "100.64.0.2", "hypervisor": "hv7"}, ...],
                   "acls": []}, ...],
     "networks": [{"switch": "net0", "vms": n, "hosts": h}, ...],
     "traffic": [{"switch": "net0", "from": "net0-vm3", "to": "net0-vm9", "bps": 812}, ...]}

Hosts are the NVP workload's hypervisors (`hvN`, the same documentation addresses): the pool
is hv1..hvH, and NVP's hypervisors at a scale are its first ones. Network i's subnet is the
smallest prefix that holds its VMs, the networks' prefixes consecutive in 100.64.0.0/10;
MACs are `0a:01:` plus the VM's index over all networks. A network's hosts are
`sample(range(pool), h)`; its VMs go round-robin over them in a shuffled order, so every
host has one when n >= h. All draws come from one `random.Random(seed)`, network by network
(hosts, VM order, then its traffic).
"""

from __future__ import annotations

import ipaddress
import math
import random
from collections.abc import Sequence
from typing import Any

from loom_lab import workload

OFFLOAD_THRESHOLD_BPS = 20_000
"""Andromeda's offload threshold: what `heavy` is the share of talking pairs above."""
ADDRESSES = ipaddress.IPv4Network("100.64.0.0/10")
"""Where the networks' subnets are (shared address space: nothing here routes to it)."""
MAX_RATE_BPS = 10_000_000_000
"""A pair's rate is capped at a 10 Gb/s link."""


def generate(networks: Sequence[tuple[int, int]], *, pool: int | None = None, seed: int = 1,
             scale: float | None = None, peers: float = 4.0, alpha: float = 1.2,
             heavy: float = 0.02) -> dict[str, Any]:  # fmt: skip
    """Return the workload document (see the module docstring).

    Args:
        networks: each network's (VMs, hosts).
        pool: the hosts the networks are scheduled on (default: the most any network spans,
            and at least NVP's hypervisors at `scale`).
        seed: the seed of the one `random.Random` every draw comes from.
        scale: NVP's workload at this scale beside the networks (None: none).
        peers: how many others of its network a VM talks to, on average.
        alpha: the Pareto shape of a talking pair's rate.
        heavy: the share of talking pairs over `OFFLOAD_THRESHOLD_BPS`.

    Raises:
        ValueError: a network has fewer than 2 VMs or hosts, spans more hosts than the pool,
            or the networks do not fit in `ADDRESSES`; a traffic parameter is out of range.
    """
    if not networks:
        raise ValueError("at least one network (VMS:HOSTS)")
    if not (peers >= 0 and alpha > 0 and 0 < heavy < 1):
        raise ValueError("peers >= 0, alpha > 0 and 0 < heavy < 1 are needed")
    base = workload.generate(scale) if scale is not None else None
    n_nvp = len(base["hypervisors"]) if base is not None else 0
    pool = pool if pool is not None else max(max(h for _, h in networks), n_nvp)
    for vms, hosts in networks:
        if vms < 2 or hosts < 1 or hosts > pool:
            raise ValueError(f"network {vms}:{hosts}: needs 2+ VMs on 1..{pool} hosts (the pool)")
    rng = random.Random(seed)
    # (the scale of the rate so that P(rate > threshold) = heavy: (xm / threshold)^alpha)
    xm = OFFLOAD_THRESHOLD_BPS * heavy ** (1 / alpha)
    switches = list(base["switches"]) if base is not None else []
    described, traffic = [], []
    start, index = int(ADDRESSES.network_address), 0
    for i, (vms, hosts) in enumerate(networks):
        subnet = _subnet(start, vms)
        start = int(subnet.broadcast_address) + 1
        name = f"net{i}"
        chosen = rng.sample(range(1, pool + 1), hosts)
        order = list(range(vms))
        rng.shuffle(order)
        host_of = {vm: chosen[k % hosts] for k, vm in enumerate(order)}
        first = int(subnet.network_address) + 2
        ports = [
            {"name": f"{name}-vm{k}", "mac": _mac(index + k),
             "ip": str(ipaddress.IPv4Address(first + k)), "hypervisor": f"hv{host_of[k]}"}
            for k in range(vms)
        ]  # fmt: skip
        index += vms
        switches.append({"name": name, "subnet": str(subnet), "ports": ports, "acls": []})
        described.append({"switch": name, "vms": vms, "hosts": hosts})
        traffic += _traffic(rng, name, vms, peers, alpha, xm)
    hypervisors = [
        {"name": f"hv{n}", "encap": "geneve", "ip": workload.hypervisor_ip(n)}
        for n in range(1, max(pool, n_nvp) + 1)
    ]
    return {"shape": "andromeda", "seed": seed, "scale": scale, "pool": pool,
            "hypervisors": hypervisors, "switches": switches, "networks": described,
            "traffic": traffic}  # fmt: skip


def _subnet(start: int, vms: int) -> ipaddress.IPv4Network:
    """The smallest prefix at or after `start` with room for `vms` VMs (network, gateway
    and broadcast addresses aside), aligned; within `ADDRESSES`."""
    bits = max(2, math.ceil(math.log2(vms + 3)))
    size = 1 << bits
    aligned = -(-start // size) * size
    subnet = ipaddress.IPv4Network((aligned, 32 - bits))
    if not subnet.subnet_of(ADDRESSES):
        raise ValueError(f"the networks need more addresses than {ADDRESSES} has")
    return subnet


def _traffic(rng: random.Random, name: str, vms: int, peers: float, alpha: float,
             xm: float) -> list[dict[str, Any]]:  # fmt: skip
    """A network's talking pairs: `round(vms * peers)` distinct (from, to) pairs of
    distinct VMs, in the order drawn, each with its Pareto rate."""
    wanted = min(round(vms * peers), vms * (vms - 1))
    seen: set[tuple[int, int]] = set()
    pairs: list[dict[str, Any]] = []
    while len(pairs) < wanted:
        a, b = rng.randrange(vms), rng.randrange(vms)
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        bps = min(MAX_RATE_BPS, int(xm * rng.paretovariate(alpha)))
        pairs.append({"switch": name, "from": f"{name}-vm{a}", "to": f"{name}-vm{b}", "bps": bps})
    return pairs


def _mac(index: int) -> str:
    """`0a:01:` and the VM's index over all networks, in 4 bytes."""
    return "0a:01:" + ":".join(f"{(index >> s) & 0xFF:02x}" for s in (24, 16, 8, 0))


def parse_network(text: str) -> tuple[int, int]:
    """`VMS:HOSTS` (`40000:10000`) as a pair.

    Raises:
        ValueError: not two positive integers separated by a colon.
    """
    vms, sep, hosts = text.partition(":")
    try:
        pair = int(vms), int(hosts)
    except ValueError:
        pair = (0, 0)
    if not sep or min(pair) < 1:
        raise ValueError(f"network {text!r}: not VMS:HOSTS (40000:10000)")
    return pair
