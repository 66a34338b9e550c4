"""The tunnel ports a transport node should have, as the physical controller decides them
(pure: `loom_ovs.manager`'s `NodeSession.configure_ops` makes the node's ports so)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

FLOW = "flow"
"""A tunnel port's `remote_ip` (and `key`) when flows set them per packet."""
FLOW_TUNNEL_OFPORTS = {"geneve": 65001, "vxlan": 65002, "stt": 65003}
"""The OpenFlow port each flow-based tunnel port asks for (`ofport_request`): known before
the node answers, so a new node's first table already reaches the other nodes (else it is
pushed again, whole, once its tunnel port has a number: at 3,000 nodes a second pass of
seconds). High in the range (1-65279), which vswitchd gives out upwards: a VIF gets there
only after tens of thousands of ports came and went on the node. A node whose port has
another number (made before, or the number taken) says so, and its flows follow what it
says."""


@dataclass(frozen=True, order=True)
class TunnelSpec:
    """One tunnel port a node should have: to one peer (where BFD watches it), or
    flow-based (`remote_ip` "flow", `peer` ""): the node's one port per encapsulation for
    every other destination, which a flow names by setting `tun_dst`."""

    peer: str
    """The remote node's system-id ("" for a flow-based port)."""
    encap: str
    """`geneve`, `vxlan` or `stt`."""
    remote_ip: str
    bfd: bool = False

    @classmethod
    def flow_based(cls, encap: str) -> TunnelSpec:
        """The node's flow-based port for `encap`."""
        return cls("", encap, FLOW)

    @property
    def port_name(self) -> str:
        """The port's name: short (15 characters fit a kernel device), stable per peer."""
        if self.remote_ip == FLOW:
            return f"loom-{self.encap}"
        return f"lt{zlib.crc32(f'{self.peer}/{self.encap}'.encode()):08x}"

    @property
    def ofport_request(self) -> int | None:
        """The OpenFlow port the port asks for (a flow-based port's `FLOW_TUNNEL_OFPORTS`;
        None for a per-peer port: a few per node, numbered by the node)."""
        return FLOW_TUNNEL_OFPORTS.get(self.encap) if self.remote_ip == FLOW else None
