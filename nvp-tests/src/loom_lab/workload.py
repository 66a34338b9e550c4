"""The NVP paper's controller workload (Koponen et al., NSDI 2014, §6.1), generated.

At scale factor S: ``round(3000·S)`` hypervisors with 21 VIFs each, so ``21·round(3000·S)``
logical ports, on ``round(7000·S)`` logical switches of 2 to 64 ports (9 on average);
port-specific ACLs on ``round(49188·S)`` ports (78%) and isolation ACLs on
``round(1553·S)`` switches (22%). Benchmarks of Loom and of the OVN baseline load the same
topology from it. With seed 1, scales 0.1 and 1.0 reproduce, value for value, the reference
files the project's published figures were measured on (``nvp-scale-0.1.json.gz`` and
``nvp-scale-1.0.json.gz``); `json.dumps` of the document with its default separators even
gives their exact bytes.

The document (plain JSON types; keys in this order)::

    {"scale": S, "seed": N,
     "hypervisors": [{"name": "hv1", "encap": "geneve", "ip": "192.0.2.1"}, ...],
     "switches": [{"name": "ls0", "subnet": "10.0.0.0/24",
                   "ports": [{"name": "ls0-p0", "mac": "0a:00:00:00:00:00",
                              "ip": "10.0.0.2", "hypervisor": "hv124"}, ...],
                   "acls": [{"direction": "to-lport", "priority": 1001,
                             "match": "outport == \\"ls0-p0\\" && ip4 && tcp.dst == {22, 80, 443}",
                             "action": "allow", "kind": "port"}, ...]}, ...]}

Names and addresses follow from positions: hypervisor ``hvN`` (N from 1) has a documentation
address, the Nth of 192.0.2.1-254, 198.51.100.1-254, 203.0.113.1-254, then ``2001:db8::N``
(N in hex) — nothing may ever be sent to one. Switch ``lsJ`` has subnet ``10.(J>>8).(J&255).0/24``;
its Kth port is ``lsJ-pK`` with address ``.K+2``; MACs are ``0a:00:00:00:00:00`` plus the
port's index over all switches. A switch's ``acls`` are its ports' ``kind: "port"`` ACLs in
port order (allow TCP 22, 80 and 443 to the port, priority 1001), then, if the switch is
isolated, its two ``kind: "isolation"`` ACLs (allow IPv4 from its own subnet, priority 1000;
drop other IPv4, priority 900).

The random choices, all from one `random.Random(seed)`, in this order (the order is part of
the format: changing it changes every workload):

1. Switch sizes: for each switch, ``min(64, 2 + int(expovariate(1 / 7.5)))`` (2 plus a
   geometric variable, mean 9.01); then the first size is set to 64 and the second to 2, so that
   both bounds occur; then, while the total exceeds the port count, a random switch other
   than those two (``randrange(2, switches)``) loses a port unless it has 2 (and, while the
   total falls short, gains one unless it has 64); then the sizes are shuffled. (At the
   reference scales no draw exceeds 64 and the total only ever shrinks, so the clamp and the
   growing loop are this module's choice, not taken from the files.)
2. Placement: the list of port indices is shuffled, and its consecutive runs of 21 go to
   hv1, hv2, ... in turn, so every hypervisor has exactly 21 VIFs.
3. ACLs: ``sample(range(ports), round(49188·S))`` are the ports with a port ACL, then
   ``sample(range(switches), round(1553·S))`` the isolated switches (49,188 and 1,553 being
   the full-scale counts, 78.08% and 22.19%).

Only the Python standard library is used (checked on CPython 3.11: the draws depend on
`random`'s algorithms for these calls, not on the platform). Usage::

    loom-workload --scale 0.1 [--seed 1] --out nvp-scale-0.1.json.gz   # .gz: gzip; '-': stdout
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

HYPERVISORS = 3000
"""Hypervisors at scale 1."""
VIFS_PER_HYPERVISOR = 21
SWITCHES = 7000
"""Logical switches at scale 1."""
MIN_PORTS = 2
MAX_PORTS = 64
SIZE_SCALE = 7.5
"""Mean of the exponential draw whose integer part is added to `MIN_PORTS`."""
PORT_ACLS = 49188
"""Ports with a port-specific ACL at scale 1 (78%)."""
ISOLATED_SWITCHES = 1553
"""Switches with isolation ACLs at scale 1 (22%)."""
MAX_SWITCHES = 1 << 16
"""Each switch has a /24 of 10.0.0.0/8."""

_HYPERVISOR_NETS = ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
_HYPERVISOR_V6 = ipaddress.IPv6Address("2001:db8::")


def generate(scale: float, seed: int = 1) -> dict[str, Any]:
    """Return the NVP workload document at `scale` (see the module docstring for its shape).

    Args:
        scale: the scale factor S; 1.0 is the paper's 3,000 hypervisors.
        seed: the seed of the one `random.Random` every random choice comes from.

    Returns:
        The workload document, made of dicts, lists, strings and numbers.

    Raises:
        ValueError: `scale` is not a finite positive number, or gives too few hypervisors or
            switches to hold the sizes' bounds (below about 0.0013), or more switches than
            10.0.0.0/8 has /24s.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite positive number, not {scale!r}")
    n_hypervisors = round(HYPERVISORS * scale)
    n_switches = round(SWITCHES * scale)
    n_ports = VIFS_PER_HYPERVISOR * n_hypervisors
    # The first two switches are pinned to 64 and 2 ports, the others have at least 2 (and,
    # at 9 ports a switch on average, room for the rest below 64).
    if n_switches < 2 or n_ports < MAX_PORTS + MIN_PORTS * (n_switches - 1):
        raise ValueError(f"scale {scale} is too small for the workload's shape")
    if n_switches > MAX_SWITCHES:
        raise ValueError(f"scale {scale} needs more than {MAX_SWITCHES} switch subnets")
    rng = random.Random(seed)
    sizes = _switch_sizes(rng, n_switches, n_ports)
    hypervisor_of = _placement(rng, n_ports)
    acl_ports = set(rng.sample(range(n_ports), round(PORT_ACLS * scale)))
    isolated = set(rng.sample(range(n_switches), round(ISOLATED_SWITCHES * scale)))

    hypervisors = [
        {"name": f"hv{n}", "encap": "geneve", "ip": hypervisor_ip(n)}
        for n in range(1, n_hypervisors + 1)
    ]
    switches: list[dict[str, Any]] = []
    index = 0
    for j, size in enumerate(sizes):
        prefix = f"10.{j >> 8}.{j & 255}"
        subnet = f"{prefix}.0/24"
        ports: list[dict[str, Any]] = []
        acls: list[dict[str, Any]] = []
        for k in range(size):
            name = f"ls{j}-p{k}"
            ports.append(
                {
                    "name": name,
                    "mac": _mac(index),
                    "ip": f"{prefix}.{k + 2}",
                    "hypervisor": f"hv{hypervisor_of[index]}",
                }
            )
            if index in acl_ports:
                acls.append(port_acl(name))
            index += 1
        if j in isolated:
            acls.extend(isolation_acls(subnet))
        switches.append({"name": f"ls{j}", "subnet": subnet, "ports": ports, "acls": acls})
    return {"scale": float(scale), "seed": seed, "hypervisors": hypervisors, "switches": switches}


def _switch_sizes(rng: random.Random, n_switches: int, n_ports: int) -> list[int]:
    """Return the port counts of the switches, in switch order: 2..64 each, `n_ports` in all."""
    sizes = [
        min(MAX_PORTS, MIN_PORTS + int(rng.expovariate(1 / SIZE_SCALE))) for _ in range(n_switches)
    ]
    sizes[0] = MAX_PORTS
    sizes[1] = MIN_PORTS
    total = sum(sizes)
    while total > n_ports:
        i = rng.randrange(2, n_switches)
        if sizes[i] > MIN_PORTS:
            sizes[i] -= 1
            total -= 1
    while total < n_ports:
        i = rng.randrange(2, n_switches)
        if sizes[i] < MAX_PORTS:
            sizes[i] += 1
            total += 1
    rng.shuffle(sizes)
    return sizes


def _placement(rng: random.Random, n_ports: int) -> list[int]:
    """Return each port's hypervisor number (from 1): a shuffle cut into runs of 21."""
    order = list(range(n_ports))
    rng.shuffle(order)
    hypervisor_of = [0] * n_ports
    for position, port in enumerate(order):
        hypervisor_of[port] = position // VIFS_PER_HYPERVISOR + 1
    return hypervisor_of


def hypervisor_ip(n: int) -> str:
    """Return the documentation address of hypervisor `hvN` (`n` from 1)."""
    block, offset = divmod(n - 1, 254)
    if block < len(_HYPERVISOR_NETS):
        return str(ipaddress.IPv4Network(_HYPERVISOR_NETS[block])[offset + 1])
    return str(_HYPERVISOR_V6 + n)


def _mac(index: int) -> str:
    """Return the MAC of the port with global `index`: 0a:00:00:00:00:00 + `index`."""
    return ":".join(f"{b:02x}" for b in (0x0A0000000000 + index).to_bytes(6, "big"))


def port_acl(port: str) -> dict[str, Any]:
    """Return the port-specific ACL of `port`: allow TCP 22, 80 and 443 to it."""
    return {
        "direction": "to-lport",
        "priority": 1001,
        "match": f'outport == "{port}" && ip4 && tcp.dst == {{22, 80, 443}}',
        "action": "allow",
        "kind": "port",
    }


def isolation_acls(subnet: str) -> list[dict[str, Any]]:
    """Return a switch's isolation ACLs: IPv4 from its own `subnet` allowed, other IPv4 not."""
    return [
        {
            "direction": "to-lport",
            "priority": 1000,
            "match": f"ip4 && ip4.src == {subnet}",
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


def dumps(doc: dict[str, Any]) -> bytes:
    """Return `doc` as JSON bytes, in the reference files' format (`json.dumps` defaults)."""
    return json.dumps(doc).encode()


def write(doc: dict[str, Any], out: str) -> None:
    """Write `doc` as JSON to the file `out` (gzip if it ends in ``.gz``), or stdout for '-'.

    The gzip header carries no timestamp and no name, so equal documents give equal files.
    """
    data = dumps(doc)
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        if out.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        with open(out, "wb") as f:
            f.write(data)


def read(path: str | Path) -> dict[str, Any]:
    """Read a workload file (`.json`, or `.json.gz`)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        doc: dict[str, Any] = json.load(handle)
    return doc


def add_arguments(parser: argparse.ArgumentParser, *, scale: float = 0.1) -> None:
    """Give a benchmark's command line the workload options: `--scale S` (generated here,
    seed 1; default `scale`) or `--workload FILE` (one written by `loom-workload`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scale", type=float, default=scale,
                       help=f"the NVP workload at this scale (default {scale}; 1.0: 3,000 "
                       "hypervisors, 63,000 ports)")  # fmt: skip
    group.add_argument("--workload", type=Path, metavar="FILE",
                       help="a workload file instead (loom-workload's output)")  # fmt: skip


def from_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The workload `add_arguments`' options name."""
    return read(args.workload) if args.workload is not None else generate(args.scale)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the `loom-workload` command line."""
    parser = argparse.ArgumentParser(
        prog="loom-workload",
        description="Write the NVP paper's controller workload as JSON, or Andromeda's large "
        "networks (beside it, with --scale) and their traffic (loom_lab.andromeda).",
    )
    parser.add_argument("--scale", type=float, help="NVP's scale factor (1.0: 3,000 HVs)")
    parser.add_argument("--andromeda", action="append", default=[], metavar="VMS:HOSTS",
                        help="a network: VMS VMs on HOSTS hosts of the pool "
                        "(repeatable)")  # fmt: skip
    parser.add_argument("--pool", type=int, help="the hosts the networks are scheduled on "
                        "(default: the most any network spans)")  # fmt: skip
    parser.add_argument("--peers", type=float, default=4.0,
                        help="the VMs each VM talks to, on average (default 4)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="output file (gzip if .gz; '-' for stdout)"
    )
    args = parser.parse_args(argv)
    if args.scale is None and not args.andromeda:
        parser.error("--scale or --andromeda is required")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of `loom-workload`."""
    args = parse_args(argv)
    try:
        if args.andromeda:
            from loom_lab import andromeda  # (it builds on this module)

            networks = [andromeda.parse_network(text) for text in args.andromeda]
            doc = andromeda.generate(networks, pool=args.pool, seed=args.seed,
                                     scale=args.scale, peers=args.peers)  # fmt: skip
        else:
            doc = generate(args.scale, args.seed)
    except ValueError as e:
        print(f"loom-workload: {e}", file=sys.stderr)
        return 2
    write(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
