"""A kept OpenFlow 1.5 connection to one bridge, for pushing flow changes in bundles.

`Channel(remote)` connects to `unix:PATH` (the bridge's management socket), `tcp:IP:PORT`
(a bridge listening with `ptcp:`) or `ssl:IP:PORT` (with `pssl:`: the channel presents the
controller's certificate, requires the switch's, signed by the authority `tls` trusts, and,
given `peer`, that it names the node: `loom_common.pki.peer_name`), says HELLO offering
OpenFlow 1.5 only, and keeps the connection. `bundle(messages)` sends one atomic, ordered
bundle: OPEN, one ADD per flow_mod, a BARRIER (so that every ADD has been judged), then
COMMIT if none was refused, DISCARD if one was; it returns once the switch has answered the
COMMIT, which OVS sends after the flows are in its tables. A refused message raises
`BundleRefused` naming it (nothing of the bundle is applied); a broken connection raises
`ChannelError`, and the next call connects again.

Two questions a controller asks every bridge it connects to go on the channel too (no
`ovs-ofctl` run for either): `flow_count()` (an OpenFlow 1.5 aggregate statistics request:
is the bridge empty?) and `map_tlv()` (Nicira's TLV table mod: which Geneve option a
`tun_metadata<n>` field means; a mapping already there, the same, is success, as
`ovs-ofctl add-tlv-map` cannot say). Both, like bundles, are refused to a slave.

The switch's echo requests are answered whenever the channel reads (before each bundle too):
an idle channel can outlive the switch's inactivity probe only by being read, and a channel
the switch closed meanwhile is noticed before a bundle is sent into it. A controller that
keeps channels idle watches their `fileno()` and calls `check()` when one is readable: it
answers the switch and says whether the connection is still there (a switch whose
ovs-vswitchd was restarted has lost its table, and the channel's end is the one certain sign
of it: OVSDB shows nothing). `connections` counts the connections made: one made again,
by any call, is a switch whose table is not known any more.

One thread uses a channel at a time (the physical controller pushes a node from one thread).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable, Sequence

from loom_common import unixsock
from loom_common.errors import LoomError
from loom_common.pki import peer_name
from loom_ovs import ofp

_ERROR_TYPES = {0: "hello failed", 1: "bad request", 2: "bad action", 3: "bad instruction",
                4: "bad match", 5: "flow mod failed", 11: "role request failed",
                17: "bundle failed"}  # fmt: skip


class ChannelError(LoomError):
    """The OpenFlow connection failed (connect, handshake, I/O or timeout)."""

    message = "OpenFlow %(remote)s: %(detail)s"


class BundleRefused(ChannelError):
    """The switch refused a message of a bundle; nothing of it was applied."""


class Deposed(ChannelError):
    """The switch knows a newer master (a newer generation id): this channel may not write."""


class Channel:
    """A kept OpenFlow 1.5 connection to one bridge."""

    def __init__(self, remote: str, *, timeout: float = 10.0, tls: ssl.SSLContext | None = None,
                 peer: str | None = None) -> None:  # fmt: skip
        """A channel, not yet connected (the first exchange connects).

        Args:
            remote: `unix:PATH`, `tcp:IP:PORT` or `ssl:IP:PORT`.
            timeout: seconds any one exchange may take.
            tls: for `ssl:`, the client context (`loom_common.pki.client_context`).
            peer: for `ssl:`, the name the switch's certificate must carry (its system-id).
        """
        self.remote = remote
        self.timeout = timeout
        self.tls = tls
        self.peer = peer
        self._sock: socket.socket | None = None
        self._buf = b""
        self._xid = 0
        self._bundle_id = 0
        self.generation: int | None = None
        """The generation id this channel claims the master role with (None: no role
        asked; the switch's default, "equal")."""
        self.connections = 0
        """Connections made so far (each one's HELLO answered)."""

    # ---- connection ----

    def _connect(self) -> socket.socket:
        kind, _, where = self.remote.partition(":")
        if kind not in ("unix", "tcp", "ssl"):
            raise ChannelError(remote=self.remote, detail="not unix:PATH, tcp: or ssl:IP:PORT")
        if kind == "ssl" and self.tls is None:
            raise ChannelError(remote=self.remote, detail="ssl: without TLS credentials")
        try:
            if kind == "unix":
                sock = unixsock.connect(where, self.timeout)
            else:
                host, _, port = where.rpartition(":")
                sock = socket.create_connection((host.strip("[]"), int(port)), self.timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if kind == "ssl":
                    sock = self._handshake(sock)
        except OSError as exc:
            raise ChannelError(remote=self.remote, detail=f"connect: {exc}") from exc
        self._sock, self._buf = sock, b""
        try:
            self._send(ofp.hello(self._next_xid()))
            version, msg_type, _, _ = self._read()
        except ChannelError:
            self.close()
            raise
        if msg_type != ofp.OFPT_HELLO or version < ofp.VERSION:
            self.close()
            raise ChannelError(remote=self.remote, detail=f"no OpenFlow 1.5 (HELLO {version})")
        self.connections += 1
        if self.generation is not None:
            self._ask_master(self.generation)
        return sock

    def _handshake(self, sock: socket.socket) -> ssl.SSLSocket:
        """TLS over `sock`: the switch's certificate verified, and naming `peer`."""
        assert self.tls is not None
        try:
            secured = self.tls.wrap_socket(sock)  # (the handshake, within the timeout)
        except OSError:
            sock.close()
            raise
        name = peer_name(secured)
        if self.peer is not None and name != self.peer:
            secured.close()
            raise ssl.SSLError(f"the switch's certificate names {name!r}, not {self.peer!r}")
        return secured

    def claim(self, generation: int) -> None:
        """Be the bridge's master with `generation` (a fencing token that grows with each
        new master: the ZooKeeper assignment's zxid), now and on every reconnect. The
        switch makes any other master a slave, whose flow changes it then refuses; a
        deposed controller's claim with an older generation raises `Deposed`."""
        self.generation = generation
        if self._sock is None:
            self._connect()
        else:
            self._ask_master(generation)

    def _ask_master(self, generation: int) -> None:
        xid = self._next_xid()
        self._send(ofp.role_request(ofp.OFPCR_ROLE_MASTER, generation, xid))
        while True:
            _, msg_type, got, body = self._read()
            if got != xid:
                continue
            if msg_type == ofp.OFPT_ERROR:
                err_type, code = struct.unpack_from("!HH", body)
                if (err_type, code) == (ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE):
                    stale = f"generation {generation} is stale: the switch has a newer master"
                    raise Deposed(remote=self.remote, detail=stale)
                raise ChannelError(remote=self.remote, detail=_error_text(body, "role request"))
            return

    @property
    def connected(self) -> bool:
        """The channel holds a connection (not closed by either side as far as it read)."""
        return self._sock is not None

    def fileno(self) -> int | None:
        """The connection's descriptor (None: not connected)."""
        return self._sock.fileno() if self._sock is not None else None

    def check(self) -> bool:
        """Read what the switch sent while the channel was idle (its echo requests are
        answered), without connecting; False if the connection is gone (closed then)."""
        if self._sock is None:
            return False
        try:
            while self._read(block=False)[1] != -1:
                pass  # stray replies (none expected) are dropped
        except ChannelError:
            return False
        return True

    def close(self) -> None:
        """Close the connection (the next `bundle` connects again)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # ---- I/O ----

    def _next_xid(self) -> int:
        """1, 2, ... 2**32 - 1, 1, ...: never 0, which pre-encoded messages carry."""
        self._xid = self._xid % 0xFFFFFFFF + 1
        return self._xid

    def _send(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.settimeout(self.timeout)  # (blocking again after a non-blocking read)
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise ChannelError(remote=self.remote, detail=f"send: {exc}") from exc

    def _read(self, *, block: bool = True) -> tuple[int, int, int, bytes]:
        """The next message (version, type, xid, body), answering echo requests on the way.
        With `block` False, returns (0, -1, 0, b"") when nothing is waiting."""
        assert self._sock is not None
        deadline = time.monotonic() + self.timeout
        while True:
            if len(self._buf) >= 8:
                version, msg_type, length, xid = struct.unpack_from("!BBHI", self._buf)
                if length < 8:
                    self.close()
                    raise ChannelError(remote=self.remote, detail=f"bad message length {length}")
                if len(self._buf) >= length:
                    body, self._buf = self._buf[8:length], self._buf[length:]
                    if msg_type == ofp.OFPT_ECHO_REQUEST:
                        self._send(ofp.header(ofp.OFPT_ECHO_REPLY, 8 + len(body), xid) + body)
                        continue
                    return version, msg_type, xid, body
            try:
                if block:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("no answer")
                    self._sock.settimeout(left)
                    data = self._sock.recv(65536)
                else:
                    # (not MSG_DONTWAIT: a socket with a timeout first waits for input)
                    self._sock.setblocking(False)
                    data = self._sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError):
                return 0, -1, 0, b""
            except OSError as exc:
                self.close()
                raise ChannelError(remote=self.remote, detail=f"receive: {exc}") from exc
            if not data:
                self.close()
                raise ChannelError(remote=self.remote, detail="connection closed by the switch")
            self._buf += data

    def _drain(self) -> None:
        """Answer what the switch sent while the channel was idle; reconnect if it hung up."""
        if self._sock is None:
            self._connect()
            return
        try:
            while self._read(block=False)[1] != -1:
                pass  # stray replies (none expected) are dropped
        except ChannelError:
            self._connect()

    # ---- questions ----

    def _ask(self, message: bytes, xid: int) -> tuple[int, bytes]:
        """Send `message` (with `xid`) and read until the switch answers it: (the answer's
        type, its body); an error about it is returned as its answer."""
        self._drain()
        self._send(message)
        while True:
            _, msg_type, got, body = self._read()
            if got == xid:
                return msg_type, body

    def flow_count(self) -> int:
        """How many flows the bridge holds, in every table (what `ovs-ofctl
        dump-aggregate` prints as `flow_count`: OVS counts no hidden flow)."""
        xid = self._next_xid()
        msg_type, body = self._ask(ofp.flow_stats_request(ofp.OFPMP_AGGREGATE_STATS, xid), xid)
        if msg_type == ofp.OFPT_ERROR:
            raise ChannelError(remote=self.remote, detail=_error_text(body, "aggregate stats"))
        if msg_type != ofp.OFPT_MULTIPART_REPLY or len(body) < 8:
            raise ChannelError(remote=self.remote, detail=f"aggregate stats: answered {msg_type}")
        try:
            count = ofp.parse_oxs_flow_count(body[8:])
        except ValueError as exc:
            raise ChannelError(remote=self.remote, detail=f"aggregate stats: {exc}") from exc
        if count is None:
            raise ChannelError(remote=self.remote, detail="aggregate stats: no flow count")
        return count

    def map_tlv(self, entry: ofp.TlvMap) -> None:
        """Map a tunnel option to a `tun_metadata<n>` field: `entry` is (option class,
        type, length, n). OVS refuses to map an index mapped already (to anything) and an
        option mapped to another index; then the switch's table is read, and the mapping
        being `entry` already is success."""
        xid, barrier = self._next_xid(), self._next_xid()
        self._drain()
        self._send(ofp.tlv_table_mod(ofp.NXTTMC_ADD, [entry], xid)
                   + ofp.header(ofp.OFPT_BARRIER_REQUEST, 8, barrier))  # fmt: skip
        refusal = None  # (a mod that succeeds has no answer: the barrier's says it is done)
        while True:
            _, msg_type, got, body = self._read()
            if got == xid and msg_type == ofp.OFPT_ERROR:
                refusal = body
            elif got == barrier:
                break
        if refusal is None:
            return
        err_type, code = struct.unpack_from("!HH", refusal)
        taken = (ofp.NXTTMFC_ALREADY_MAPPED, ofp.NXTTMFC_DUP_ENTRY)
        if err_type != ofp.OFPET_EXPERIMENTER or code not in taken:
            raise ChannelError(remote=self.remote, detail=_error_text(refusal, "TLV table mod"))
        xid = self._next_xid()
        msg_type, body = self._ask(ofp.tlv_table_request(xid), xid)
        if msg_type != ofp.OFPT_EXPERIMENTER:
            raise ChannelError(remote=self.remote, detail=_error_text(body, "TLV table request"))
        maps = ofp.parse_tlv_maps(body, 8 + 16)  # (experimenter header, nx_tlv_table_reply)
        if entry not in maps:
            raise ChannelError(
                remote=self.remote,
                detail=f"tun_metadata{entry[3]} is not {entry[:3]}: the switch maps {maps}",
            )

    # ---- bundles ----

    def packet_out(self, data: bytes, actions: str) -> None:
        """Send the frame `data` with `actions` (as the master: a slave's is refused), and
        wait for the switch to have taken it (a barrier); refused: `ChannelError`."""
        self._drain()
        self._send(ofp.packet_out(data, actions, self._next_xid()))
        barrier = self._next_xid()
        self._send(ofp.header(ofp.OFPT_BARRIER_REQUEST, 8, barrier))
        refused = self._await(barrier, {})
        if refused:
            raise ChannelError(remote=self.remote, detail="; ".join(refused))

    def bundle(
        self, messages: Sequence[tuple[bytes, Callable[[], str]]], chunks: Sequence[bytes] = ()
    ) -> None:
        """Apply `messages` (each an encoded message with xid 0, and what gives its name
        for an error, called only if it is refused), then the adds in `chunks` (each a run
        of `ofp.bundle_add` messages to bundle `ofp.BULK_BUNDLE` with xid 0: bytes made once
        and sent to many switches, which an error can only count), atomically, in order."""
        if not messages and not chunks:
            return
        self._drain()
        if chunks:
            bundle_id = ofp.BULK_BUNDLE
        else:
            self._bundle_id = bundle_id = self._bundle_id % 0xFFFFFFFF + 1  # (never BULK)
        named: dict[int, Callable[[], str]] = {}
        out = [ofp.bundle_control(bundle_id, ofp.OFPBCT_OPEN_REQUEST, self._next_xid())]
        for message, name in messages:
            xid = self._next_xid()
            named[xid] = name
            inner = message[:4] + struct.pack("!I", xid) + message[8:]
            out.append(ofp.bundle_add(bundle_id, inner, xid))
        out += chunks
        barrier = self._next_xid()
        out.append(ofp.header(ofp.OFPT_BARRIER_REQUEST, 8, barrier))
        self._send(b"".join(out))
        refused = self._await(barrier, named)
        ctl = ofp.OFPBCT_DISCARD_REQUEST if refused else ofp.OFPBCT_COMMIT_REQUEST
        done = self._next_xid()
        self._send(ofp.bundle_control(bundle_id, ctl, done))
        refused += self._await(done, named)
        if refused:
            more = f"; and {len(refused) - 5} more" if len(refused) > 5 else ""
            raise BundleRefused(remote=self.remote, detail="; ".join(refused[:5]) + more)

    def _await(self, xid: int, named: dict[int, Callable[[], str]]) -> list[str]:
        """Read until the answer to `xid`; the errors seen on the way, in words."""
        errors = []
        while True:
            _, msg_type, got, body = self._read()
            if msg_type == ofp.OFPT_ERROR:
                name = named.get(got)
                errors.append(_error_text(body, name() if name else f"xid {got}"))
                if got == xid:
                    return errors
            elif got == xid:
                return errors


def _error_text(body: bytes, what: str) -> str:
    if len(body) < 4:
        return f"{what}: error"
    err_type, code = struct.unpack_from("!HH", body)
    if err_type == ofp.OFPET_EXPERIMENTER and len(body) >= 8:  # (type, code, experimenter)
        vendor = struct.unpack_from("!I", body, 4)[0]
        return f"{what}: experimenter {vendor:#x} error {code}"
    return f"{what}: {_ERROR_TYPES.get(err_type, f'type {err_type}')} (code {code})"
