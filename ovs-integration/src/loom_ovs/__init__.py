"""Loom's libraries for Open vSwitch transport nodes.

- `loom_ovs.manager`: the passive OVSDB manager (nodes dial in; one replica per connection)
  and the node configuration it writes (`br-int`, tunnel ports, BFD).
- `loom_ovs.openflow`: a node's desired OpenFlow table (one flow per match, conflicts
  reported) and its push with `ovs-ofctl` bundles (atomic; only differences).
- `loom_ovs.sandbox`: simulated transport nodes (real ovsdb-server + ovs-vswitchd) for
  tests and `loom up`.

The stand-in nodes of the benchmarks, and the demo `loom up --demo` runs, are the lab's
(`loom_lab.standin`, `loom_lab.demo`, in the workspace member `nvp-tests`).
"""
