"""Stand-in transport nodes: many simulated nodes in one process, for benchmarking the
physical controllers at NVP scale (3,000 nodes) where 3,000 ovs-vswitchd cannot run.

Each stand-in dials the controllers as a real node does, so the controllers do for it
all the work they do for a real node: its own OVSDB manager connection to every
controller, serving its `Open_vSwitch` database (its rows and VIFs; the controller's
br-int, tunnel ports, BFD, QoS, zone records and fencing token written by `transact`,
read back by `monitor`), and its own OpenFlow 1.5 channel, on which the controller claims
the master role, maps the Geneve option, asks the flow count and pushes bundles that the
stand-in acknowledges and applies to a flow table of its own. What a stand-in does not
do is forward packets: it keeps flows as bytes and checks little of them.

The parts (each module's docstring says what it implements and what it does not):

- `db`: the database: OVSDB transactions (atomic; `wait`; named uuids; references,
  garbage collection, indexes) and monitors, from the real schema file; pure;
- `vswitch`: the hypervisor's writes (the node's rows, VIFs plugged and unplugged) and
  ovs-vswitchd's (ofports as OVS allocates them, BFD status); pure;
- `switch`: br-int's OpenFlow: handshake, roles and fencing, bundles, flow mods, flow and
  aggregate statistics, the TLV table, errors as OVS sends them; pure;
- `flows`: a flow kept as the bytes of its flow mod, and the table digest (with
  `expected_digest` for the controller's side);
- `fleet`: the process: one asyncio loop serving every node's connections, and a
  control socket (VIFs plugged and unplugged at run time, counters, digests);
- `handle`: `Fleet`, which starts the process as a supervised child, drives it, and reads
  its CPU time and memory from `/proc` (reported apart from the controllers');
  `FleetGroup`, several such processes serving the nodes as one.

    fleet = Fleet(run_dir, [NodeSpec("hv1", "172.31.0.2", (VifSpec("vm1", "vif-1",
                  "50:54:00:00:00:01"),))], [controller.target]).start()
    fleet.add_vif("hv1", "vm2", "vif-2", "50:54:00:00:00:02")
    assert fleet.digest("hv1") == expected_digest(controller.flows("hv1"))
"""

from loom_lab.standin.fleet import NodeSpec, VifSpec
from loom_lab.standin.flows import expected_digest, table_digest
from loom_lab.standin.handle import Fleet, FleetGroup, StandinError

__all__ = [
    "Fleet",
    "FleetGroup",
    "NodeSpec",
    "StandinError",
    "VifSpec",
    "expected_digest",
    "table_digest",
]
