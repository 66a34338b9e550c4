"""The OpenFlow encoder against OVS's own: every construct Loom's rules use, encoded here and
by `ovs-ofctl`, must mean the same to OVS (`ovs-ofctl ofp-print` decodes both identically).

(`ovs-ofctl` cannot say some matches in OXM, `vlan_tci=0x0000/0x1000` for one, which OVS
takes as NXM fields inside an OXM match: test_openflow installs those on a real switch.)

`ovs-ofctl` is made to show its bytes by pointing it at a listening socket that plays the
switch (HELLO, BARRIER replies) and keeps every FLOW_MOD it is sent."""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from loom_common.ovsdb import tool
from loom_ovs import ofp

CORPUS = """\
table=0,priority=100,cookie=0x4c4d,in_port=10 actions=set_field:0x1->metadata,set_field:0x1->reg14,resubmit(,8)
table=0,priority=110,cookie=0x7004c4d,in_port=3,tun_metadata0=0xffff/0xffff actions=move:NXM_NX_TUN_ID[0..23]->OXM_OF_METADATA[0..23],move:NXM_NX_TUN_METADATA0[16..31]->NXM_NX_REG14[0..15],set_field:0xffff/0xffff->reg15,set_field:0x1/0x1->reg10,resubmit(,64)
table=0,priority=90,cookie=0x4c4d,in_port=9,dl_vlan=100 actions=pop_vlan,set_field:0x3->metadata,resubmit(,8)
table=0,priority=80,cookie=0x4c4d,in_port=4,tun_id=0x5 actions=resubmit(,15)
table=10,priority=90,cookie=0x4c4d,metadata=0x1,reg14=0x1,icmp6,icmp_type=136,icmp_code=0,nd_target=fe80::200:ff:fe00:1,nd_tll=00:00:00:00:00:01 actions=resubmit(,11)
table=10,priority=90,cookie=0x4c4d,metadata=0x1,icmp6,icmp_type=135,icmp_code=0,nd_sll=00:00:00:00:00:00 actions=resubmit(,11)
table=10,priority=90,cookie=0x4c4d,metadata=0x1,reg14=0x2,arp,arp_spa=10.0.0.2,arp_sha=00:00:00:00:00:02 actions=resubmit(,11)
table=10,priority=90,cookie=0x4c4d,metadata=0x1,dl_src=02:00:00:00:00:00/01:00:00:00:00:00,ipv6,ipv6_src=fe80::/10 actions=drop
table=12,priority=65534,cookie=0x4c4d,metadata=0x1,reg10=0x20/0x20,ct_state=+est+trk actions=resubmit(,13)
table=12,priority=65535,cookie=0x4c4d,metadata=0x1,ct_state=-new+inv+trk,ct_zone=3,ct_mark=0x1/0x1 actions=drop
table=12,priority=2,cookie=0x4c4d,metadata=0x1,reg10=0x10/0x10,udp,tp_src=68,tp_dst=67 actions=resubmit(,13)
table=12,priority=2,cookie=0x4c4d,metadata=0x1,tcp,nw_src=10.0.0.0/255.255.0.0,tp_dst=0x50/0xfff0 actions=conjunction(7,1/2)
table=12,priority=2,cookie=0x4c4d,metadata=0x1,tcp6,ipv6_dst=2001:db8::/32,tp_src=1024 actions=conjunction(7,2/2)
table=12,priority=2,cookie=0x4c4d,metadata=0x1,conj_id=7,tcp actions=resubmit(,13)
table=12,priority=3,cookie=0x4c4d,metadata=0x1,sctp,tp_dst=5000,nw_ttl=1 actions=drop
table=13,priority=50,cookie=0x4c4d,metadata=0x1,arp,arp_op=1,arp_tpa=10.0.0.1 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:00:00:00:00:00:01->eth_src,set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:00:00:00:00:00:01->arp_sha,move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:10.0.0.1->arp_spa,move:NXM_NX_REG14[]->NXM_NX_REG15[],set_field:0x2/0x2->reg10,resubmit(,40)
table=13,priority=50,cookie=0x4c4d,metadata=0x1,icmp6,icmp_type=135,nd_target=2001:db8::1 actions=move:NXM_NX_IPV6_SRC[]->NXM_NX_IPV6_DST[],set_field:2001:db8::1->ipv6_src,set_field:255->nw_ttl,set_field:136->icmpv6_type,set_field:0x60000000->nd_reserved,set_field:2->nd_options_type,resubmit(,14)
table=13,priority=40,cookie=0x4c4d,metadata=0x1,icmp,icmp_type=8,nw_dst=10.0.0.1 actions=move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[],set_field:10.0.0.1->ip_src,set_field:0->icmp_type,move:NXM_NX_REG14[0]->NXM_NX_REG15[3],resubmit(1,14)
table=20,priority=5,cookie=0x4c4d,metadata=0x1,ip,nw_dst=10.0.0.0/8 actions=ct(commit,table=41,zone=1,nat(src=172.16.0.100)),ct(table=11,zone=1,nat),ct(commit,zone=NXM_NX_REG13[0..15]),ct_clear,dec_ttl
table=20,priority=6,cookie=0x4c4d,metadata=0x1,ip actions=ct(commit,zone=5,nat(dst=10.0.0.5-10.0.0.9:80-90)),ct(commit,zone=5,exec(set_field:0x1/0x1->ct_mark))
table=20,priority=7,cookie=0x4c4d,metadata=0x1,ipv6 actions=ct(commit,zone=5,nat(src=[2001:db8::1]))
table=21,priority=5,cookie=0x4c4d,metadata=0x1,ip,nw_dst=10.0.0.5 actions=set_field:0xa000005->reg0,set_field:0x5->xreg1,move:NXM_NX_REG0[]->NXM_NX_XXREG0[0..31],resubmit(,22)
table=64,priority=5,cookie=0x4c4d,metadata=0x1 actions=clone(move:OXM_OF_METADATA[0..23]->NXM_NX_TUN_ID[0..23],bundle(eth_src,0,active_backup,ofport,members:4,5)),push_vlan:0x8100,set_field:4196->vlan_vid,set_field:0->in_port,output:9,pop_vlan
table=64,priority=4,cookie=0x4c4d,metadata=0x1 actions=set_field:0x5->tun_id,output:4,output:in_port,output:LOCAL
table=65,priority=0,cookie=0x4c4d actions=drop
"""


def ofctl_flow_mods(flows: list[str], tmp: Path) -> list[bytes]:
    """The FLOW_MODs `ovs-ofctl add-flows` sends for `flows` (OpenFlow 1.5)."""
    path = tmp / "fake-switch.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(30)
    sent: list[bytes] = []

    def play_switch() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(ofp.hello())
            buf = b""
            while data := conn.recv(65536):
                buf += data
                while len(buf) >= 8:
                    msg_type, length, xid = struct.unpack_from("!xBHI", buf)
                    if len(buf) < length:
                        break
                    message, buf = buf[:length], buf[length:]
                    if msg_type == ofp.OFPT_BARRIER_REQUEST:
                        conn.sendall(ofp.header(ofp.OFPT_BARRIER_REPLY, 8, xid))
                    elif msg_type == ofp.OFPT_FLOW_MOD:
                        sent.append(message)

    thread = threading.Thread(target=play_switch, daemon=True)
    thread.start()
    try:
        done = subprocess.run(
            [tool("ovs-ofctl"), "-O", "OpenFlow15", "--no-names", "add-flows", f"unix:{path}", "-"],
            input="".join(f"{f}\n" for f in flows), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        thread.join(30)
    finally:
        server.close()
    return sent


def printed(message: bytes) -> str:
    """What OVS reads in `message` (`ovs-ofctl ofp-print`), without the xid."""
    done = subprocess.run([tool("ovs-ofctl"), "ofp-print", message.hex()], capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "error" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout.split(": ", 1)[1].strip()


def _ours(flow: str) -> bytes:
    head, _, actions = flow.partition(" actions=")
    parts = head.split(",")
    fields = dict(p.split("=", 1) for p in parts[:3])
    return ofp.flow_mod(ofp.OFPFC_ADD, int(fields["table"]), int(fields["priority"]),
                        ",".join(parts[3:]), actions, int(fields["cookie"], 0), 0)  # fmt: skip


@pytest.mark.ovs
def test_every_construct_means_to_ovs_what_ovs_ofctl_sends(tmp_path: Path) -> None:
    flows = CORPUS.splitlines()
    theirs = ofctl_flow_mods(flows, tmp_path)
    assert len(theirs) == len(flows)
    for flow, their_message in zip(flows, theirs, strict=True):
        assert printed(_ours(flow)) == printed(
            their_message[:4] + b"\0" * 4 + their_message[8:]
        ), flow


def test_delete_strict_carries_the_key_only() -> None:
    message = ofp.flow_mod(ofp.OFPFC_DELETE_STRICT, 8, 50, "metadata=0x1,reg14=0x1", None, 0, 9)
    assert message[1] == ofp.OFPT_FLOW_MOD
    assert struct.unpack_from("!I", message, 4)[0] == 9
    assert message[25] == ofp.OFPFC_DELETE_STRICT
    assert len(message) == struct.unpack_from("!H", message, 2)[0]
    assert len(message) % 8 == 0


@pytest.mark.parametrize(
    ("match", "actions", "named"),
    [
        ("metadata=0x1,tp_dst=80", "drop", "tp_dst needs tcp, udp or sctp"),
        ("metadata=0x1,no_such_field=1", "drop", "no_such_field"),
        ("metadata=0x1", "learn(table=1)", "learn"),
        ("metadata=0x1", "set_field:1->no_such", "no_such"),
        ("metadata=0x1", "move:NXM_NX_REG0[0..3]->NXM_NX_REG1[0..7]", "4 bits to 8"),
        ("dl_src=00:00:00:00:00", "drop", "dl_src"),
        ("ip,nw_dst=10.0.0.0/33", "drop", "/33"),
        ("ct_state=+bogus", "drop", "bogus"),
    ],
)
def test_unknown_syntax_is_refused_by_name(match: str, actions: str, named: str) -> None:
    with pytest.raises(ofp.FlowSyntaxError, match=named.replace("/", ".")):
        ofp.flow_mod(ofp.OFPFC_ADD, 0, 1, match, actions, 0, 0)
