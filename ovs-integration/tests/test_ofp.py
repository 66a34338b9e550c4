"""The OpenFlow encoder against OVS's own: every construct Loom's rules use, encoded here and
by `ovs-ofctl`, must mean the same to OVS (`ovs-ofctl ofp-print` decodes both identically).

(`ovs-ofctl` cannot say some matches in OXM, `vlan_tci=0x0000/0x1000` for one, which OVS
takes as NXM fields inside an OXM match: test_openflow installs those on a real switch.)

`ovs-ofctl` is made to show its bytes by pointing it at a listening socket that plays the
switch (HELLO, BARRIER replies) and keeps every FLOW_MOD it is sent."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_common.ovsdb import tool
from loom_ddlog._native import bulk_adds as native_bulk_adds
from loom_ddlog._native import encode_actions as native_encode_actions
from loom_ovs import ofp
from loom_ovs.openflow import Flow, bulk_adds, encode
from loom_schemas.pipeline import table_number

CORPUS = Path(__file__).with_name("corpus.flows")
"""One flow a line: every construct the encoder knows."""


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
    flows = CORPUS.read_text().splitlines()
    theirs = ofctl_flow_mods(flows, tmp_path)
    assert len(theirs) == len(flows)
    for flow, their_message in zip(flows, theirs, strict=True):
        assert printed(_ours(flow)) == printed(their_message[:4] + b"\0" * 4 + their_message[8:]), (
            flow
        )


def test_delete_strict_carries_the_key_only() -> None:
    message = ofp.flow_mod(ofp.OFPFC_DELETE_STRICT, 8, 50, "metadata=0x1,reg14=0x1", None, 0, 9)
    assert message[1] == ofp.OFPT_FLOW_MOD
    assert struct.unpack_from("!I", message, 4)[0] == 9
    assert message[25] == ofp.OFPFC_DELETE_STRICT
    assert len(message) == struct.unpack_from("!H", message, 2)[0]
    assert len(message) % 8 == 0


def test_a_match_is_the_same_bytes_in_any_order() -> None:
    """Fields sorted after their prerequisites: the rules' text and OVS's printing of it
    (`diff-flows`) encode alike (stand-in nodes keep flows by their bytes)."""
    pairs = [
        ("in_port=1,reg0=5", "reg0=0x5,in_port=1"),
        (
            "metadata=0x1,ip,nw_src=10.0.0.0/8,reg14=0x2",
            "reg14=0x2,ip,metadata=0x1,nw_src=10.0.0.0/8",
        ),
        (
            "tcp6,tp_dst=80,metadata=0x3,ct_state=+trk-est",
            "ct_state=-est+trk,tcp6,metadata=0x3,tp_dst=80",
        ),
    ]
    for rules, printed in pairs:
        assert ofp.encode_match(rules) == ofp.encode_match(printed)
    # prerequisites still first: the EtherType, then the IP protocol, then the rest
    body = ofp.encode_match("tp_dst=80,reg0=1,tcp")[4:]
    assert [struct.unpack_from("!I", body, at)[0] >> 9 & 0x7F for at in (0, 6)] == [5, 10]


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


SNAPSHOTS = Path(__file__).parents[2] / "tests" / "snapshots"


def _parsed(line: str) -> tuple[int, int, int, str, str]:
    """A golden or corpus line as (table, priority, cookie, match, actions); its
    placeholders (`<tun:flow-geneve>`, `<p1>`, `<uplink-mac:...>`, `members:{<p1>}`) as
    numbers or a MAC."""
    line = re.sub(r"<uplink-mac[^>]*>", "00:00:00:00:00:07", line).replace("{", "").replace("}", "")
    head, _, actions = re.sub(r"<[^>]*>", "7", line).partition(" actions=")
    parts = head.split(",")
    fields = dict(p.split("=", 1) for p in parts[:3])
    return (table_number(fields["table"]), int(fields["priority"]), int(fields["cookie"], 0),
            ",".join(parts[3:]), actions)  # fmt: skip


def _reference(row: tuple[int, int, int, str, str]) -> bytes:
    table, priority, cookie, match, actions = row
    return ofp.bundle_add(ofp.BULK_BUNDLE, ofp.flow_mod(ofp.OFPFC_ADD, table, priority, match,
                                                        actions, cookie, 0), 0)  # fmt: skip


def _native(row: tuple[int, int, int, str, str]) -> bytes:
    *head, actions = row
    return native_bulk_adds([(*head, ofp.encode_actions(actions) if actions else b"")])


def test_the_native_table_encoder_sends_the_reference_bytes_for_every_rules_flow() -> None:
    """Every flow of every node golden and of the corpus: the native encoder takes it (it
    declines none: whole tables go its way) and gives the reference encoder's bytes; a
    table of them is their concatenation (`bulk_adds`); each change (`encode`: add,
    modify, delete) is the reference's message."""
    lines = CORPUS.read_text().splitlines()
    for golden in sorted(SNAPSHOTS.glob("*.hv*.golden")):
        lines += golden.read_text().splitlines()
    rows = [_parsed(line) for line in lines if line.startswith("table=")]
    assert len(rows) > 2000
    for row in rows:
        assert _native(row) == _reference(row), row
    flows = [Flow(t, p, m, a, c) for t, p, c, m, a in rows[:300]]
    assert bulk_adds(flows) == b"".join(_reference(row) for row in rows[:300])
    # the actions: natively, every list the rules write (nat and all)
    for *_, actions in rows:
        assert native_encode_actions(actions) == ofp.encode_actions(actions), actions
    # single changes (`encode`, native too): each command as the reference has it
    for t, p, c, m, a in rows:
        flow = Flow(t, p, m, a, c)
        assert encode(("add", flow)) == ofp.flow_mod(ofp.OFPFC_ADD, t, p, m, a, c, 0)
        assert encode(("modify", flow)) == ofp.flow_mod(ofp.OFPFC_MODIFY_STRICT, t, p, m, a, c, 0)
        assert encode(("delete", flow)) == ofp.flow_mod(ofp.OFPFC_DELETE_STRICT, t, p, m, None,
                                                        0, 0)  # fmt: skip


_VALUES = st.sampled_from(["0", "1", "0x5", "0x800000", "65535", "0x1/0x1", "0/0x800000",
                           "10.0.0.1", "10.0.0.0/8", "10.0.0.0/33", "010.0.0.1", "fe80::1",
                           "fe80::/64", "00:00:00:00:00:01", "00:00:00:00:00:01/01:00:00:00:00:00",
                           "+trk+est", "-new+trk", "+bogus", "in_port", "LOCAL", "08", "-1",
                           "0x1ffffffffffffffff", "", "1 ", " 0x10"])  # fmt: skip
_NAMES = st.sampled_from(["in_port", "metadata", "reg0", "reg14", "reg15", "reg16", "xreg3",
                          "xxreg1", "dl_src", "dl_dst", "eth_dst", "dl_type", "eth_type",
                          "nw_src", "nw_dst", "ip_dst", "ipv6_src", "nw_proto", "ip_proto",
                          "tp_src", "tp_dst", "icmp_type", "icmp_code", "icmpv4_type",
                          "nd_target", "nd_sll", "arp_op", "arp_sha", "ct_state", "ct_zone",
                          "ct_mark", "tun_id", "tun_dst", "tun_metadata0", "dl_vlan",
                          "vlan_tci", "vlan_vid", "conj_id", "pkt_mark", "nw_ttl", "NXM_NX_REG0",
                          "Reg1", "bogus"])  # fmt: skip
_PIECES = st.one_of(
    st.tuples(_NAMES, _VALUES).map(lambda nv: f"{nv[0]}={nv[1]}"),
    st.sampled_from(["ip", "ipv6", "arp", "tcp", "udp6", "icmp", "icmp6", "sctp", "", " ", "x"]),
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=6).map(",".join), st.integers(0, 254), st.integers(0, 65535))
def test_the_native_encoder_gives_the_reference_bytes_or_declines(
    match: str, table: int, priority: int
) -> None:
    """Any match: the same bytes as the reference, or declined (the reference then encodes
    it or refuses it); never bytes where the reference refuses."""
    row = (table, priority, 0x4C4D, match, "resubmit(,8)")
    _agree_or_decline(lambda: _reference(row), lambda: _native(row))


def _agree_or_decline(reference: Callable[[], bytes], native: Callable[[], bytes]) -> None:
    """The native encoder gives the reference's bytes, or declines (`ValueError`); it never
    encodes what the reference refuses."""
    try:
        expected: bytes | None = reference()
    except (ofp.FlowSyntaxError, OverflowError, ValueError, struct.error):
        expected = None
    try:
        got: bytes | None = native()
    except ValueError:
        got = None
    if got is not None:
        assert got == expected


_ARGS = st.sampled_from(
    ["", "0", "1", "0x10", ",8", "8,", ",70", "in_port,9", "LOCAL", "0xff00", "65536", "-1",
     "08", " 7 "]
)  # fmt: skip
_REFS = st.sampled_from(
    ["NXM_NX_REG0[]", "NXM_NX_REG13[0..15]", "reg14[0..15]", "OXM_OF_METADATA[0..23]",
     "NXM_NX_TUN_ID[0..23]", "NXM_NX_TUN_METADATA0[16..31]", "xxreg1[0..31]", "NXM_NX_REG15[16]",
     "reg0[5..2]", "reg0[0..32]", "nxm_nx_xxreg0[0..127]", "bogus[]", "NXM_NX_REG0",
     "OXM_OF_PKT_REG1[0..63]"]
)  # fmt: skip
_CONJUNCTIONS = ["7,1/2", "7, 2 /2", "7,0/2", "x", "1,1/300"]
_BUNDLES = ["eth_src,0,active_backup,ofport,members:1,2", "symmetric_l4,50,hrw,ofport,members:",
            "nw_src,0,bogus,ofport,members:1", "eth_src,0,hrw,ofport,members:LOCAL, 7"]  # fmt: skip
_CT_ARGS = [
    "commit", "force", "zone=5", "zone=NXM_NX_REG13[0..15]", "table=70", "alg=ftp", "alg=21",
    "nat", "nat(src=10.0.0.1)", "nat(dst=10.0.0.1-10.0.0.9:80-90,persistent)",
    "nat(src=[fe80::1]:443,random)", "nat(src=[fe80::1]x)", "nat(bogus)",
    "exec(set_field:0x1/0x1->ct_mark)", "exec(move:NXM_NX_REG0[]->NXM_NX_CT_MARK[])", "bad",
]  # fmt: skip
_WORDS = ["drop", "pop_vlan", "strip_vlan", "dec_ttl", "ct_clear", "learn(x)",
          "clone(resubmit(,8),drop)", "clone(set_field:1->reg0,output:3)", ""]  # fmt: skip
_ACTION = st.one_of(
    st.builds("resubmit({})".format, _ARGS),
    st.builds("output:{}".format, _ARGS),
    st.builds("output({})".format, _ARGS),
    _ARGS,
    st.builds("set_field:{}->{}".format, _VALUES, _NAMES),
    st.builds("move:{}->{}".format, _REFS, _REFS),
    st.builds("push_vlan:{}".format, st.sampled_from(["0x8100", "33024", "0x10000", "x"])),
    st.builds("conjunction({})".format, st.sampled_from(_CONJUNCTIONS)),
    st.builds("bundle({})".format, st.sampled_from(_BUNDLES)),
    st.builds("ct({})".format, st.lists(st.sampled_from(_CT_ARGS), max_size=4).map(",".join)),
    st.sampled_from(_WORDS),
)


@settings(max_examples=4000, deadline=None)
@given(st.lists(_ACTION, max_size=4).map(",".join))
def test_the_native_actions_are_the_reference_s_or_declined(actions: str) -> None:
    """Any action list: the reference's bytes, or declined; never bytes where the
    reference refuses."""
    _agree_or_decline(lambda: ofp.encode_actions.__wrapped__(actions),
                      lambda: native_encode_actions(actions))  # fmt: skip
