"""Loom's libraries for Open vSwitch transport nodes.

- `loom_ovs.manager`: the passive OVSDB manager (nodes dial in; one replica per connection)
  and the node configuration it writes (`br-int`, tunnel ports, BFD).
- `loom_ovs.openflow`: a node's desired OpenFlow table (one flow per match, conflicts
  reported) and its push with `ovs-ofctl` bundles (atomic; only differences).
- `loom_ovs.sandbox`: simulated transport nodes (real ovsdb-server + ovs-vswitchd) for
  tests and `loom up`.
- `loom_ovs.standin`: stand-in transport nodes, thousands in one process, that dial the
  controllers as real nodes do (OVSDB served, OpenFlow bundles applied), for benchmarks.
"""
