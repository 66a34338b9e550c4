"""A stand-in node's OpenFlow: its br-int (flow table, TLV map, master election) and the
OpenFlow 1.5 connections to it, answered as ovs-vswitchd answers them (`ofproto.c`,
`connmgr.c`, `bundles.c`). Pure: bytes in (`Connection.receive`), bytes out (the
connection's `send`); the fleet owns the sockets.

Per connection:

- HELLO: the stand-in offers OpenFlow 1.5 only (a version bitmap) and takes 1.5 if the
  controller offers it, else answers HELLO_FAILED/INCOMPATIBLE and closes (OVS with
  `protocols=OpenFlow15`);
- ECHO, FEATURES, GET_CONFIG/SET_CONFIG, BARRIER (everything before it is applied: the
  stand-in applies each message when it reads it);
- ROLE_REQUEST: equal (the default), master or slave, with generation ids compared as
  OVS compares them (a master or slave request older than the newest seen is refused,
  ROLE_REQUEST_FAILED/STALE); a new master demotes the previous one, which is sent a
  ROLE_STATUS; a slave's writes (flow mods, bundles, packet-outs, TLV mods) are refused,
  BAD_REQUEST/IS_SLAVE;
- FLOW_MOD, alone or in a bundle: `add` (replaces a flow of the same key), `modify_strict`
  (the flow's instructions; its cookie stays; a missing flow: nothing, as OpenFlow 1.5 on
  OVS), `delete_strict` (a missing flow: nothing), with the cookie mask; `modify` and
  `delete` (loose) only with an empty match (every flow of the table, or of all tables
  for a delete); anything else, and an `out_port`/`out_group` filter, is refused
  (FLOW_MOD_FAILED/BAD_COMMAND) and logged: the stand-in does not parse matches. A flow
  mod's key is its table, priority and match bytes (`loom_lab.standin.flows`): the match
  and the actions are neither parsed nor checked;
- BUNDLE_CONTROL (open, close, commit, discard) and BUNDLE_ADD_MESSAGE of FLOW_MODs and
  PACKET_OUTs: checked when added (inner xid, version, length, type, command, table id,
  flags), applied all at once at commit (so a commit never fails half-way), replies and
  errors as OVS's (a bundle opened twice, unknown, closed, or with other flags is
  refused and dropped). Adds and strict modifies added to an open bundle, most of a cold
  start's bytes, are read natively as far as they run (`standin_bundle_adds`, with the
  same checks), and adds are kept natively at commit (`standin_apply_adds`): a fraction of
  Python's cost a flow add, since the benchmark's two cores are shared with the
  controllers it measures;
- PACKET_OUT: counted, not executed;
- MULTIPART: DESC; FLOW_DESC (every flow, from the bytes kept: so `ovs-ofctl dump-flows`
  and `diff-flows` read a stand-in's table, in parts of at most 64 kB; match filters are
  not supported) and AGGREGATE_STATS (the flow count, packets and bytes 0), for all
  tables or one;
- Nicira NXT_TLV_TABLE_MOD (add, delete, clear; an index mapped already, or an option
  mapped to another index, refused as OVS refuses them) and NXT_TLV_TABLE_REQUEST;
- anything else: logged once per kind, answered BAD_REQUEST (BAD_TYPE, BAD_MULTIPART,
  BAD_EXPERIMENTER or BAD_EXP_TYPE), so a gap shows as an error instead of a hang.

The stand-in sends no echo requests of its own (OVS probes an idle management
connection every 60 s; an idle controller is never dropped here).
"""

from __future__ import annotations

import collections
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loom_ddlog._native import standin_apply_adds, standin_bundle_adds
from loom_lab.standin.flows import EMPTY_MATCH, MATCH_AT
from loom_ovs import ofp

log = logging.getLogger(__name__)

INTERN_LIMIT = 1 << 22
"""Entries of a fleet's shared flow bytes (`Bridge.intern`) before it starts over: what
is shared saves memory (most flows are the same on every node with their datapath), and
starting over loses no flow."""
COMMIT_LOG = 64
"""Bundle commits kept per bridge (`Bridge.commits`)."""
MAX_PART = 65000
"""The most bytes of flows in one multipart reply message (a message's length is 16 bits)."""
_NO_ID = (1 << 64) - 1
_ANY = 0xFFFFFFFF
_OXS_EMPTY = ofp.oxs_stats(0, 0)
_ZERO_COOKIE = bytes(8)
_BUNDLABLE = (ofp.OFPT_FLOW_MOD, ofp.OFPT_PACKET_OUT)
_WRITES = frozenset({ofp.OFPT_FLOW_MOD, ofp.OFPT_PACKET_OUT, ofp.OFPT_BUNDLE_CONTROL,
                     ofp.OFPT_BUNDLE_ADD_MESSAGE})  # fmt: skip
_logged: set[str] = set()


def _log_once(what: str) -> None:
    if what not in _logged:
        _logged.add(what)
        log.warning("stand-in: %s (answered with an OpenFlow error)", what)


@dataclass
class Counters:
    """What a stand-in's switch has done (read by benchmarks)."""

    bundles: int = 0
    """Bundles committed."""
    discarded: int = 0
    flow_mods: int = 0
    """Flow mods applied (in committed bundles and alone)."""
    packet_outs: int = 0
    tlv_mods: int = 0
    errors: int = 0
    """OpenFlow errors sent."""
    unknown: int = 0
    """Messages answered BAD_REQUEST because the stand-in does not know them."""
    connections: int = 0
    """OpenFlow connections accepted."""


@dataclass
class Bridge:
    """One node's br-int, as its OpenFlow connections see it."""

    datapath_id: int
    flows: dict[bytes, bytes] = field(default_factory=dict)
    """Flow key -> value (`loom_lab.standin.flows`)."""
    tlv: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """tun_metadata index -> (option class, type, length)."""
    election_id: int | None = None
    """The newest master election (generation) id seen."""
    connections: list[Connection] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)
    intern: dict[bytes, bytes] | None = None
    """Shared across a fleet's bridges: equal keys and values kept once."""
    commits: collections.deque[tuple[float, int]] = field(
        default_factory=lambda: collections.deque(maxlen=COMMIT_LOG)
    )
    """The latest bundle commits: (wall-clock time, flow mods in it). A benchmark times a
    change from outside the controllers by them."""
    on_commit: Callable[[], None] | None = None
    """Called after each bundle commit is logged in `commits`."""


@dataclass
class _Bundle:
    flags: int
    closed: bool = False
    messages: list[bytes] = field(default_factory=list)


class Connection:
    """One OpenFlow connection to a bridge."""

    def __init__(self, bridge: Bridge, send: Callable[[bytes], None],
                 close: Callable[[], None]) -> None:  # fmt: skip
        """Describe a connection; `start()` says HELLO.

        Args:
            bridge: the bridge it connects to.
            send: writes bytes to the controller.
            close: closes the connection (after a failed handshake).
        """
        self.bridge = bridge
        self.send = send
        self.close = close
        self.version = 0
        """The version agreed (0: no HELLO yet)."""
        self.role = ofp.OFPCR_ROLE_EQUAL
        self.bundles: dict[int, _Bundle] = {}
        self._buf = b""
        self._handlers: dict[int, Callable[[bytes, int], None]] = {
            ofp.OFPT_ECHO_REQUEST: self._echo,
            ofp.OFPT_ECHO_REPLY: lambda _m, _x: None,
            ofp.OFPT_ERROR: self._error_received,
            ofp.OFPT_FEATURES_REQUEST: self._features,
            ofp.OFPT_GET_CONFIG_REQUEST: self._get_config,
            ofp.OFPT_SET_CONFIG: lambda _m, _x: None,
            ofp.OFPT_BARRIER_REQUEST: self._barrier,
            ofp.OFPT_ROLE_REQUEST: self._role,
            ofp.OFPT_FLOW_MOD: self._flow_mod,
            ofp.OFPT_PACKET_OUT: self._packet_out,
            ofp.OFPT_MULTIPART_REQUEST: self._multipart,
            ofp.OFPT_BUNDLE_CONTROL: self._bundle_control,
            ofp.OFPT_BUNDLE_ADD_MESSAGE: self._bundle_add,
            ofp.OFPT_EXPERIMENTER: self._experimenter,
        }

    def start(self) -> None:
        """The connection is up: say HELLO (OpenFlow 1.5 only)."""
        self.bridge.connections.append(self)
        self.bridge.counters.connections += 1
        self.send(ofp.hello())

    def lost(self) -> None:
        """The connection is gone: its bundles are discarded, its role forgotten."""
        self.bundles.clear()
        if self in self.bridge.connections:
            self.bridge.connections.remove(self)

    def receive(self, data: bytes) -> None:
        """Handle the messages in `data` (and what was left of earlier data)."""
        buf = self._buf + data if self._buf else data
        at, size = 0, len(buf)
        handlers = self._handlers
        bundles = self.bundles
        fast = self.version == ofp.VERSION and self.role != ofp.OFPCR_ROLE_SLAVE
        while size - at >= 8:
            length = buf[at + 2] << 8 | buf[at + 3]
            if length < 8:
                self._fail(f"bad message length {length}")
                return
            if size - at < length:
                break
            if fast and buf[at + 1] == ofp.OFPT_BUNDLE_ADD_MESSAGE:
                # The common case, most of a cold start's bytes: flow adds (or strict
                # modifies) added to an open bundle, read natively as far as they go, each
                # checked as `_bundle_add` would check it.
                bundle_id = int.from_bytes(buf[at + 8 : at + 12], "big")
                bundle = bundles.get(bundle_id)
                if bundle is not None and not bundle.closed:
                    added, end = standin_bundle_adds(buf, at, bundle_id, bundle.flags)
                    if added:
                        bundle.messages += added
                        at = end
                        continue
            message = buf[at : at + length] if at or length != size else buf
            at += length
            msg_type = message[1]
            xid: int = struct.unpack_from("!I", message, 4)[0]
            if self.version == 0:
                if msg_type != ofp.OFPT_HELLO or not self._hello(message):
                    return
                continue
            if message[0] != self.version:
                self._reply_error(ofp.OFPET_BAD_REQUEST, 0, xid, message)  # BAD_VERSION
                continue
            if msg_type in _WRITES and self.role == ofp.OFPCR_ROLE_SLAVE:
                self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE, xid, message)
                continue
            handler = handlers.get(msg_type)
            if handler is None:
                self._unknown(f"message type {msg_type}", ofp.OFPBRC_BAD_TYPE, xid, message)
            else:
                handler(message, xid)
        self._buf = buf[at:] if at < size else b""

    # ---- replies ----

    def _reply_error(self, err_type: int, code: int, xid: int, message: bytes) -> None:
        self.bridge.counters.errors += 1
        self.send(ofp.error(err_type, code, xid, message[:64]))

    def _unknown(self, what: str, code: int, xid: int, message: bytes) -> None:
        _log_once(what)
        self.bridge.counters.unknown += 1
        self._reply_error(ofp.OFPET_BAD_REQUEST, code, xid, message)

    def _fail(self, why: str) -> None:
        log.warning("stand-in OpenFlow connection closed: %s", why)
        self._buf = b""
        self.close()

    def _hello(self, message: bytes) -> bool:
        """Agree on a version; False (the connection closed) if there is none."""
        offered = set(range(1, message[0] + 1))
        at = 8
        while at + 4 <= len(message):
            element, length = struct.unpack_from("!HH", message, at)
            if element == 1 and length >= 8:  # OFPHET_VERSIONBITMAP
                bits = int.from_bytes(message[at + 4 : at + length], "big")
                offered = {v for v in range(32) if bits >> v & 1}
            at += max(length + (-length % 8), 8)
        if ofp.VERSION not in offered:
            text = b"We support version 0x06, you support no such version."
            self.send(ofp.error(ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE, 0, text))
            self._fail(f"no common OpenFlow version (offered {sorted(offered)})")
            return False
        self.version = ofp.VERSION
        return True

    def _echo(self, message: bytes, xid: int) -> None:
        self.send(ofp.header(ofp.OFPT_ECHO_REPLY, len(message), xid) + message[8:])

    def _error_received(self, message: bytes, xid: int) -> None:
        log.info("stand-in: the controller sent an error (xid %d): %s", xid, message[8:12].hex())

    def _features(self, _message: bytes, xid: int) -> None:
        body = struct.pack("!QIBB2xII", self.bridge.datapath_id, 0, 254, 0, 0x4F, 0)
        self.send(ofp.header(ofp.OFPT_FEATURES_REPLY, 8 + len(body), xid) + body)

    def _get_config(self, _message: bytes, xid: int) -> None:
        self.send(ofp.header(ofp.OFPT_GET_CONFIG_REPLY, 12, xid) + struct.pack("!HH", 0, 128))

    def _barrier(self, _message: bytes, xid: int) -> None:
        self.send(ofp.header(ofp.OFPT_BARRIER_REPLY, 8, xid))

    # ---- roles ----

    def _role(self, message: bytes, xid: int) -> None:
        if len(message) < 24:
            self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, xid, message)
            return
        role, generation = struct.unpack_from("!I4xQ", message, 8)
        if role > ofp.OFPCR_ROLE_SLAVE:
            self._reply_error(ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_BAD_ROLE, xid, message)
            return
        bridge = self.bridge
        if role != ofp.OFPCR_ROLE_NOCHANGE:
            if role != ofp.OFPCR_ROLE_EQUAL:
                newest = bridge.election_id
                # (unsigned difference read as two's complement, as OVS compares them)
                if newest is not None and (generation - newest) & (1 << 63):
                    self._reply_error(ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE, xid,
                                      message)  # fmt: skip
                    return
                bridge.election_id = generation
            if role == ofp.OFPCR_ROLE_MASTER and self.role != role:
                for other in bridge.connections:
                    if other is not self and other.role == ofp.OFPCR_ROLE_MASTER:
                        other.role = ofp.OFPCR_ROLE_SLAVE
                        other.send(self._role_status(ofp.OFPCR_ROLE_SLAVE))
            self.role = role
        known = bridge.election_id if bridge.election_id is not None else _NO_ID
        body = struct.pack("!I4xQ", self.role, known)
        self.send(ofp.header(ofp.OFPT_ROLE_REPLY, 24, xid) + body)

    def _role_status(self, role: int) -> bytes:
        known = self.bridge.election_id if self.bridge.election_id is not None else _NO_ID
        body = struct.pack("!IB3xQ", role, 0, known)  # reason 0: another master asked
        return ofp.header(ofp.OFPT_ROLE_STATUS, 8 + len(body), 0) + body

    # ---- flows ----

    def _check_flow_mod(self, message: bytes) -> tuple[int, int] | None:
        """The error (type, code) OVS would answer a flow mod with here, if any."""
        if len(message) < MATCH_AT + 8:
            return ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN
        end = MATCH_AT + ((message[50] << 8 | message[51]) + 7 & -8)
        if end > len(message):
            return ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN
        table, command = message[24], message[25]
        if command > ofp.OFPFC_DELETE_STRICT:
            return ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND
        if table == ofp.OFPTT_ALL and command < ofp.OFPFC_DELETE:
            return ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID
        if command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT) and (
            message[36:44] != b"\xff" * 8  # out_port, out_group: filters on the actions
        ):
            _log_once("a delete with an out_port or out_group filter")
            return ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND
        if command in (ofp.OFPFC_MODIFY, ofp.OFPFC_DELETE) and (
            message[MATCH_AT:end] != EMPTY_MATCH
        ):
            _log_once("a loose modify or delete with a match (the stand-in parses no match)")
            return ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND
        return None

    def _apply(self, messages: list[bytes]) -> None:
        """Apply checked flow mods and packet-outs, in order."""
        bridge = self.bridge
        flows = bridge.flows
        intern = bridge.intern
        if intern is not None and len(intern) > INTERN_LIMIT:
            intern.clear()
        counters = bridge.counters
        at = 0
        while at < len(messages):
            # flow adds natively, as far as they go (a cold start's bundles: all of them)
            added = standin_apply_adds(messages, at, flows, intern)
            counters.flow_mods += added - at
            if added == len(messages):
                break
            message, at = messages[added], added + 1
            if message[1] != ofp.OFPT_FLOW_MOD:
                counters.packet_outs += 1
                continue
            counters.flow_mods += 1
            command = message[25]
            end = MATCH_AT + ((message[50] << 8 | message[51]) + 7 & -8)
            key = message[24:25] + message[30:32] + message[MATCH_AT:end]
            if command == ofp.OFPFC_ADD:
                value = message[8:16] + message[end:]
                if intern is not None:
                    key = intern.setdefault(key, key)
                    value = intern.setdefault(value, value)
                flows[key] = value
                continue
            mask = message[16:24]
            if command == ofp.OFPFC_MODIFY_STRICT or command == ofp.OFPFC_DELETE_STRICT:
                keys = [key] if message[24] != ofp.OFPTT_ALL else [
                    bytes([t]) + key[1:] for t in range(ofp.OFPTT_ALL)]  # fmt: skip
            else:  # loose, with an empty match: the whole table (all tables for a delete)
                table = message[24]
                keys = [k for k in flows if table == ofp.OFPTT_ALL or k[0] == table]
            for found in keys:
                old = flows.get(found)
                if old is None or not _cookie_matches(old, message[8:16], mask):
                    continue
                if command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT):
                    del flows[found]
                else:
                    value = old[:8] + message[end:]
                    flows[found] = intern.setdefault(value, value) if intern is not None else value

    def _flow_mod(self, message: bytes, xid: int) -> None:
        refused = self._check_flow_mod(message)
        if refused is not None:
            self._reply_error(*refused, xid, message)
            return
        self._apply([message])

    def _packet_out(self, _message: bytes, _xid: int) -> None:
        self.bridge.counters.packet_outs += 1

    # ---- bundles ----

    def _bundle_control(self, message: bytes, xid: int) -> None:
        if len(message) < 16:
            self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, xid, message)
            return
        bundle_id, ctl, flags = struct.unpack_from("!IHH", message, 8)
        bundle = self.bundles.get(bundle_id)
        failed = ofp.OFPET_BUNDLE_FAILED
        if ctl == ofp.OFPBCT_OPEN_REQUEST:
            if bundle is not None:
                del self.bundles[bundle_id]
                self._reply_error(failed, ofp.OFPBFC_BAD_ID, xid, message)
                return
            self.bundles[bundle_id] = _Bundle(flags)
        elif ctl in (ofp.OFPBCT_CLOSE_REQUEST, ofp.OFPBCT_COMMIT_REQUEST):
            if bundle is None:
                self._reply_error(failed, ofp.OFPBFC_BAD_ID, xid, message)
                return
            if ctl == ofp.OFPBCT_CLOSE_REQUEST and bundle.closed:
                del self.bundles[bundle_id]
                self._reply_error(failed, ofp.OFPBFC_BUNDLE_CLOSED, xid, message)
                return
            if bundle.flags != flags:
                del self.bundles[bundle_id]
                self._reply_error(failed, ofp.OFPBFC_BAD_FLAGS, xid, message)
                return
            if ctl == ofp.OFPBCT_CLOSE_REQUEST:
                bundle.closed = True
            else:
                del self.bundles[bundle_id]
                self._apply(bundle.messages)
                self.bridge.counters.bundles += 1
                self.bridge.commits.append((time.time(), len(bundle.messages)))
                if self.bridge.on_commit is not None:
                    self.bridge.on_commit()
        elif ctl == ofp.OFPBCT_DISCARD_REQUEST:
            if bundle is None:
                self._reply_error(failed, ofp.OFPBFC_BAD_ID, xid, message)
                return
            del self.bundles[bundle_id]
            self.bridge.counters.discarded += 1
        else:
            self._reply_error(failed, ofp.OFPBFC_BAD_TYPE, xid, message)
            return
        reply = struct.pack("!IHH", bundle_id, ctl + 1, 0)
        self.send(ofp.header(ofp.OFPT_BUNDLE_CONTROL, 16, xid) + reply)

    def _bundle_add(self, message: bytes, xid: int) -> None:
        failed = ofp.OFPET_BUNDLE_FAILED
        if len(message) < 24:
            self._reply_error(failed, ofp.OFPBFC_MSG_BAD_LEN, xid, message)
            return
        bundle_id, flags = struct.unpack_from("!I2xH", message, 8)
        inner_length = message[18] << 8 | message[19]
        if inner_length < 8 or 16 + inner_length > len(message):
            self._reply_error(failed, ofp.OFPBFC_MSG_BAD_LEN, xid, message)
            return
        inner = message[16 : 16 + inner_length]
        if inner[0] != message[0]:
            self.bridge.counters.errors += 1
            self.send(ofp.experimenter_error(ofp.NXBFC_BAD_VERSION, xid, message[:64]))
            return
        if inner[4:8] != message[4:8]:
            self._reply_error(failed, ofp.OFPBFC_MSG_BAD_XID, xid, message)
            return
        if inner[1] not in _BUNDLABLE:
            _log_once(f"message type {inner[1]} in a bundle")
            self._reply_error(failed, ofp.OFPBFC_MSG_UNSUP, xid, message)
            return
        if inner[1] == ofp.OFPT_FLOW_MOD:
            refused = self._check_flow_mod(inner)
            if refused is not None:
                self._reply_error(*refused, xid, inner)
                return
        bundle = self.bundles.get(bundle_id)
        if bundle is None:  # (OVS opens it)
            bundle = self.bundles[bundle_id] = _Bundle(flags)
        elif bundle.closed or bundle.flags != flags:
            del self.bundles[bundle_id]
            code = ofp.OFPBFC_BUNDLE_CLOSED if bundle.closed else ofp.OFPBFC_BAD_FLAGS
            self._reply_error(failed, code, xid, message)
            return
        bundle.messages.append(inner)

    # ---- statistics ----

    def _multipart(self, message: bytes, xid: int) -> None:
        if len(message) < 16:
            self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, xid, message)
            return
        mp_type = struct.unpack_from("!H", message, 8)[0]
        if mp_type == ofp.OFPMP_DESC:
            text = [b"Loom", b"stand-in transport node", b"loom_lab.standin", b"None",
                    b"br-int"]  # fmt: skip
            sizes = (256, 256, 256, 32, 256)
            body = b"".join(t.ljust(n, b"\0") for t, n in zip(text, sizes, strict=True))
            self.send(ofp.multipart_reply(mp_type, body, xid))
            return
        if mp_type not in (ofp.OFPMP_FLOW_DESC, ofp.OFPMP_AGGREGATE_STATS):
            self._unknown(f"multipart type {mp_type}", ofp.OFPBRC_BAD_MULTIPART, xid, message)
            return
        if len(message) < 56:
            self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, xid, message)
            return
        table = message[16]
        cookie, cookie_mask = message[32:40], message[40:48]
        if message[48:56] != EMPTY_MATCH:
            self._unknown("a flow statistics request with a match", ofp.OFPBRC_BAD_MULTIPART,
                          xid, message)  # fmt: skip
            return
        selected = [(k, v) for k, v in self.bridge.flows.items()
                    if (table == ofp.OFPTT_ALL or k[0] == table)
                    and _cookie_matches(v, cookie, cookie_mask)]  # fmt: skip
        if mp_type == ofp.OFPMP_AGGREGATE_STATS:
            body = ofp.oxs_stats(0, 0, len(selected))
            self.send(ofp.multipart_reply(mp_type, body, xid))
            return
        part: list[bytes] = []
        size = 0
        for key, value in sorted(selected):
            entry = _flow_desc(key, value)
            if size + len(entry) > MAX_PART:
                self.send(ofp.multipart_reply(mp_type, b"".join(part), xid, more=True))
                part, size = [], 0
            part.append(entry)
            size += len(entry)
        self.send(ofp.multipart_reply(mp_type, b"".join(part), xid))

    # ---- Nicira extensions ----

    def _experimenter(self, message: bytes, xid: int) -> None:
        if len(message) < 16:
            self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, xid, message)
            return
        vendor, subtype = struct.unpack_from("!II", message, 8)
        if vendor != ofp.NX_VENDOR:
            self._unknown(f"experimenter {vendor:#x}", ofp.OFPBRC_BAD_EXPERIMENTER, xid, message)
        elif subtype == ofp.NXT_TLV_TABLE_MOD:
            if self.role == ofp.OFPCR_ROLE_SLAVE:
                self._reply_error(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE, xid, message)
                return
            code = self._tlv_mod(message)
            if code is not None:
                self.bridge.counters.errors += 1
                self.send(ofp.experimenter_error(code, xid, message[:64]))
        elif subtype == ofp.NXT_TLV_TABLE_REQUEST:
            maps = [(*entry, index) for index, entry in sorted(self.bridge.tlv.items())]
            self.send(ofp.tlv_table_reply(maps, xid))
        else:
            self._unknown(f"Nicira message {subtype}", ofp.OFPBRC_BAD_EXP_TYPE, xid, message)

    def _tlv_mod(self, message: bytes) -> int | None:
        """Apply a TLV table mod, all of it or none; the Nicira error code if refused."""
        if len(message) < 24:
            return 16  # NXTTMFC_BAD_COMMAND
        command = struct.unpack_from("!H", message, 16)[0]
        tlv = dict(self.bridge.tlv)
        if command == 2:  # NXTTMC_CLEAR
            tlv.clear()
        for option_class, option_type, length, index in ofp.parse_tlv_maps(message, 24):
            if command == ofp.NXTTMC_ADD:
                if length % 4 or not 0 < length <= 124:
                    return 17  # NXTTMFC_BAD_OPT_LEN
                if index >= 64:
                    return 18  # NXTTMFC_BAD_FIELD_IDX
                if index in tlv:
                    return ofp.NXTTMFC_ALREADY_MAPPED
                if any(entry[:2] == (option_class, option_type) for entry in tlv.values()):
                    return ofp.NXTTMFC_DUP_ENTRY
                tlv[index] = (option_class, option_type, length)
            elif command == 1:  # NXTTMC_DELETE
                tlv.pop(index, None)
            elif command != 2:
                return 16
        self.bridge.tlv = tlv
        self.bridge.counters.tlv_mods += 1
        return None


def _cookie_matches(value: bytes, cookie: bytes, mask: bytes) -> bool:
    """Does a kept flow's cookie match `cookie` under `mask` (no mask: any cookie)?"""
    if mask == _ZERO_COOKIE:
        return True
    want, bits = int.from_bytes(cookie, "big"), int.from_bytes(mask, "big")
    return int.from_bytes(value[:8], "big") & bits == want & bits


def _flow_desc(key: bytes, value: bytes) -> bytes:
    """An `ofp15_flow_desc` for a kept flow (timeouts, flags and importance 0, counters 0)."""
    length = 24 + len(key) - 3 + len(_OXS_EMPTY) + len(value) - 8
    return (struct.pack("!H2xBx", length, key[0]) + key[1:3] + bytes(8) + value[:8]
            + key[3:] + _OXS_EMPTY + value[8:])  # fmt: skip
