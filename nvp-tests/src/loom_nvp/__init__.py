"""Loom judged as NVP judged its controller: whole deployments under faults.

- `site`: a deployment as `loom up` runs it (`loom_common.cli.Deployment`, supervised by
  `loom_common.supervise` on a thread, as `loom up`'s wait loop does), plus simulated
  transport nodes with VMs (`loom_ovs.sandbox`), and an HTTP client of its API.
- `load`: a write load through the API that records every acknowledged write.
- `ping`: a running ping between two VMs, and the packets it lost.
- `fresh`: whether the universal DB equals what a fresh logical controller computes.
- `faults`: the faults (kill -9, SIGSTOP past the ZooKeeper session) and what each cost:
  which process restarted the daemon, API downtime, acknowledged writes lost, time until
  the last acknowledged generation was realized, packets lost.
"""
