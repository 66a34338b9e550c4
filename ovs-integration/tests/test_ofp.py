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
