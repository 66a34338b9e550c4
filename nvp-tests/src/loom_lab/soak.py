"""How reliably the simulated deployment starts: N starts in a row, the rate reported.

`python -m loom_lab.soak --starts 50` starts a sandbox of four nodes (netdev datapath and a
VM namespace per VIF as root, as the demo has them; dummy otherwise), plugs two VIFs on
each, and stops it, N times; with `--demo`, each start is a whole `loom up --demo --check`
instead (minutes each). Prints one JSON document: starts, failures, the rate, each failure's
first line, and the seconds each start took. Not part of the test suite (fifty starts take
minutes); run it after changing how nodes or the demo start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loom_common.errors import LoomError
from loom_common.ovsdb import free_port
from loom_ovs.sandbox import Sandbox, SandboxError

NODES = 4
VIFS = 2


def sandbox_start(root: Path, datapath: str) -> None:
    """Start, wire and plug a sandbox, then stop it (raises what a step raised)."""
    with Sandbox(root, datapath=datapath) as sandbox:
        for n in range(NODES):
            node = sandbox.add_node(f"hv{n + 1}")
            for v in range(VIFS):
                i = n * VIFS + v + 1
                node.add_vif(f"vm{i}", f"vif-{i}", f"50:54:00:00:09:{i:02x}",
                             f"10.9.0.{i}/24")  # fmt: skip


def demo_start(root: Path) -> None:
    """One `loom up --demo --check` (raises with its output's tail if it fails)."""
    loom = Path(sys.executable).parent / "loom"
    done = subprocess.run([str(loom), "up", "--demo", "--check", "--api-port", str(free_port()),
                           "--state-dir", str(root / "state")],
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise SandboxError(detail="\n".join(tail) or f"exit {done.returncode}")


def soak(starts: int, *, demo: bool, datapath: str) -> dict[str, Any]:
    """Start `starts` times in a row; the figures."""
    failures: list[str] = []
    took: list[float] = []
    for i in range(starts):
        began = time.monotonic()
        outcome = "ok"
        with tempfile.TemporaryDirectory(prefix="loom-soak-") as tmp:
            try:
                if demo:
                    demo_start(Path(tmp))
                else:
                    sandbox_start(Path(tmp), datapath)
            except (LoomError, OSError, subprocess.SubprocessError) as exc:
                outcome = (str(exc) or repr(exc)).splitlines()[0]
                failures.append(f"start {i + 1}: {outcome}")
        took.append(round(time.monotonic() - began, 2))
        print(f"start {i + 1}/{starts}: {outcome}", file=sys.stderr, flush=True)
    return {"what": "loom up --demo --check" if demo else f"sandbox of {NODES} nodes ({datapath})",
            "starts": starts, "failures": len(failures),
            "success_rate": round((starts - len(failures)) / starts, 4) if starts else None,
            "failed": failures, "seconds": took}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit 1 if any start failed."""
    parser = argparse.ArgumentParser(prog="python -m loom_lab.soak", description=__doc__)
    parser.add_argument("--starts", type=int, default=50, help="starts in a row (default 50)")
    parser.add_argument("--demo", action="store_true", help="each start a loom up --demo --check")
    parser.add_argument("--datapath", choices=["netdev", "dummy"],
                        default="netdev" if os.geteuid() == 0 else "dummy")  # fmt: skip
    args = parser.parse_args(argv)
    if args.starts < 1:
        parser.error("--starts must be at least 1")
    figures = soak(args.starts, demo=args.demo, datapath=args.datapath)
    print(json.dumps(figures, indent=2))
    return 1 if figures["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
