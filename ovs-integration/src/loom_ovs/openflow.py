"""A transport node's OpenFlow table: how what Loom wants in it gets there.

The flows, the table and their encoding are `loom_ovs.flows`' (pure; re-exported here).

`Switch` pushes to one bridge. Every push is an OpenFlow 1.5 bundle, so it is atomic: a
packet sees the table before or after it, never half of it.

- `apply(mods)` for incremental changes: `add` (which replaces a flow of the same match)
  and `delete` (strict) in one bundle, encoded here (`loom_ovs.ofp`) and sent on a kept
  connection (`loom_ovs.channel`). A flow the encoder does not know goes by `ovs-ofctl
  bundle` instead (logged once per construct): slower, never wrong.
- `load(flows, encoded)`: `replace`, with the flows also as pre-encoded bundle messages
  (`bulk_adds`, made once per datapath image for every node that has it), which an empty
  bridge gets as they are.
- `replace(flows)` on (re)connect and on taking a node over: an empty bridge (the flow
  count asked on the channel) gets `flows` in one bundle; otherwise `ovs-ofctl diff-flows`
  reads the switch's table and compares it with `flows` (both parsed by OVS: a flow written
  differently but meaning the same is no difference), and the difference goes in one
  bundle on the kept connection, like `apply`'s: flows whose actions differ are modified
  in place (`modify_strict`: their age and counters stay), whose cookie differs replaced
  (an add; OpenFlow 1.1+ modifies never change a cookie), none deleted and re-added, so a
  controller restart causes no dataplane dip; and it is fenced like every push, by the
  master role (an `ovs-ofctl replace-flows` connection has the role "equal", which no newer
  master demotes). It runs rarely and reads the whole table back, which `ovs-ofctl` parses for us.

Why a native channel for `apply` (measured: `docs/physical.md`): an `ovs-ofctl` run costs a
process, a connection and a handshake whatever it carries (without `--no-names` a second
connection too, to learn port names), and a change touching many nodes pays it once for
each, on few cores; a bundle on a kept connection costs its bytes and two round trips.
"""

from __future__ import annotations

import logging
import ssl
import subprocess
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import ClassVar

from loom_common.ovsdb import tool
from loom_common.pki import Credentials, client_context
from loom_ovs import ofp
from loom_ovs.channel import BundleRefused, Channel, ChannelError
from loom_ovs.flows import (
    GENEVE_OPTION,
    GENEVE_TLV,
    MARK,
    Flow,
    FlowTable,
    Key,
    Mod,
    OpenFlowError,
    bulk_adds,
    bundle_lines,
    cookie,
    encode,
    encode_actions,
    parse_diff,
)

__all__ = [
    "GENEVE_OPTION", "GENEVE_TLV", "MARK", "Flow", "FlowTable", "Key", "Mod", "OpenFlowError",
    "Switch", "bulk_adds", "bundle_lines", "cookie", "encode", "encode_actions", "parse_diff",
]  # fmt: skip
"""(all but `Switch`: `loom_ovs.flows`')"""

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _client_context(tls: Credentials) -> ssl.SSLContext:
    """One TLS context for every node's channel (loading the files once)."""
    return client_context(tls)


class Switch:
    """One bridge's OpenFlow at `remote` (`unix:...mgmt`, `tcp:IP:PORT`, `ssl:IP:PORT` with
    `tls`, the controller's credentials, and `peer`, the node's system-id its certificate
    must name): a kept channel for bundles, the TLV map and the flow count; `ovs-ofctl`
    (with the same credentials) to compare a non-empty table with the desired one (and for
    flows the encoder does not know). `close()` when done."""

    _unencodable: ClassVar[set[str]] = set()
    """Constructs already logged as pushed with ovs-ofctl (class-wide: logged once)."""

    def __init__(self, remote: str, *, timeout: float = 30.0, tls: Credentials | None = None,
                 peer: str | None = None) -> None:  # fmt: skip
        self.remote = remote
        self.timeout = timeout
        context = None
        self._tls_args: list[str] = []
        if tls is not None and remote.startswith("ssl:"):
            context = _client_context(tls)
            self._tls_args = [f"--private-key={tls.private_key}",
                              f"--certificate={tls.certificate}",
                              f"--ca-cert={tls.peer_ca}"]  # fmt: skip
        self.channel = Channel(remote, timeout=min(timeout, 10.0), tls=context, peer=peer)
        self.fallbacks = 0
        """Pushes that went by `ovs-ofctl` because a flow could not be encoded."""

    def close(self) -> None:
        """Close the kept OpenFlow connection."""
        self.channel.close()

    def _ofctl(self, *args: str, stdin: str | None = None, ok: tuple[int, ...] = (0,)) -> str:
        # --no-names: flows name ports by number; without it every run first opens a second
        # connection to learn the port names, most of a run's time.
        argv = [tool("ovs-ofctl"), "-O", "OpenFlow15", "--no-names",
                f"--timeout={int(self.timeout)}", *self._tls_args, *args]  # fmt: skip
        try:
            done = subprocess.run(
                argv, input=stdin, capture_output=True, text=True, timeout=self.timeout + 5
            )
        except subprocess.TimeoutExpired as exc:
            raise OpenFlowError(detail=f"{' '.join(argv[3:5])}: timed out") from exc
        if done.returncode not in ok:
            raise OpenFlowError(detail=f"ovs-ofctl {args[0]} {self.remote}: {done.stderr.strip()}")
        return done.stdout

    def ensure_tlv_map(self) -> None:
        """Map the Geneve option Loom uses to `tun_metadata0`, on the channel (fenced by
        its role like a bundle; mapped already the same: nothing to do).

        Raises:
            OpenFlowError: the switch refused (a slave; `tun_metadata0` means another option).
        """
        try:
            self.channel.map_tlv(GENEVE_OPTION)
        except ChannelError as exc:
            raise OpenFlowError(detail=str(exc)) from exc

    def flow_count(self) -> int:
        """How many flows the bridge holds (asked on the channel).

        Raises:
            OpenFlowError: the channel failed.
        """
        try:
            return self.channel.flow_count()
        except ChannelError as exc:
            raise OpenFlowError(detail=str(exc)) from exc

    def apply(
        self,
        mods: list[Mod],
        adds: Sequence[bytes] = (),
        added: Callable[[], Iterable[Flow]] = tuple,
    ) -> None:
        """Apply `mods`, then the flows `added()` (given pre-encoded as `bulk_adds` chunks,
        `adds`: the bytes of a datapath's image, made once for every node), in one atomic
        bundle."""
        if not mods and not adds:
            return
        try:
            messages = [(encode(mod), mod[1].text) for mod in mods]
        except ofp.FlowSyntaxError as exc:
            if str(exc) not in self._unencodable:
                self._unencodable.add(str(exc))
                log.warning("%s: pushed with ovs-ofctl instead", exc)
            self.fallbacks += 1
            if self.channel.generation is not None:
                # `ovs-ofctl` connects with the role "equal", which no newer master demotes:
                # ask for the master role again first, so that a deposed controller finds
                # out (`Deposed`) instead of writing (a check just before the write, not a
                # fence: the rules use no construct the encoder lacks).
                try:
                    self.channel.claim(self.channel.generation)
                except ChannelError as exc:
                    raise OpenFlowError(detail=str(exc)) from exc
            lines = bundle_lines([*mods, *(("add", flow) for flow in added())])
            self._ofctl("bundle", self.remote, "-", stdin="\n".join(lines) + "\n")
            return
        try:
            self.channel.bundle(messages, adds)
        except BundleRefused as exc:
            if not adds:
                raise OpenFlowError(detail=str(exc)) from exc
            # A pre-encoded message cannot say which flow it is (all have xid 0): the same
            # bundle with every message named says (nothing of either was applied).
            self.apply([*mods, *(("add", flow) for flow in added())])
        except ChannelError as exc:
            raise OpenFlowError(detail=str(exc)) from exc

    def packet_out(self, frame: bytes, actions: str) -> None:
        """Send `frame` from the controller with `actions` (e.g. `output:PORT`)."""
        try:
            self.channel.packet_out(frame, actions)
        except ChannelError as exc:
            raise OpenFlowError(detail=str(exc)) from exc

    def replace(self, flows: Iterable[Flow], *, keep: AbstractSet[Key] = frozenset()) -> list[Mod]:
        """Make the bridge's table exactly `flows` (but for the flows `keep` names, see
        `difference`), changing only what differs, atomically, in one bundle like `apply`'s
        (fenced by the channel's master role); returns the changes made."""
        if self.flow_count() == 0:
            # A new bridge (or one a node emptied): nothing to compare with.
            mods: list[Mod] = [("add", flow) for flow in flows]
            self.apply(mods)
            return mods
        return self._reconcile(flows, keep)

    def load(self, flows: Iterable[Flow], encoded: Sequence[bytes] | None, *,
             keep: AbstractSet[Key] = frozenset()) -> None:  # fmt: skip
        """`replace(flows, keep=keep)`, given `flows` also as `bulk_adds` chunks (`encoded`;
        None: not encodable): an empty bridge gets the chunks as they are, in one bundle, so
        a whole table costs a switch its bytes, not an encoding of each flow."""
        if encoded is None:
            self.replace(flows, keep=keep)
        elif self.flow_count() != 0:
            self._reconcile(flows, keep)
        else:
            self.apply([], encoded, lambda: flows)

    def _reconcile(self, flows: Iterable[Flow], keep: AbstractSet[Key]) -> list[Mod]:
        """`replace` on a bridge that holds flows: `difference`, then one bundle."""
        mods = self.difference(flows, keep=keep)
        self.apply(mods)
        return mods

    def difference(self, flows: Iterable[Flow], *,
                   keep: AbstractSet[Key] = frozenset()) -> list[Mod]:  # fmt: skip
        """What would make the bridge's table exactly `flows` (`ovs-ofctl diff-flows`: both
        tables as OVS parses them), changing nothing. An installed flow whose key is in
        `keep` and that `flows` lacks stays (the node wrote it: a `learn` action's flow)."""
        # The wanted table on ovs-ofctl's stdin (a temporary file was left behind whenever
        # the controller was killed during a reconciliation); exit status 2: they differ.
        wanted = "".join(f"{flow.text()}\n" for flow in flows)
        diff = self._ofctl("diff-flows", self.remote, "/dev/stdin", stdin=wanted, ok=(0, 2))
        return [(op, flow) for op, flow in parse_diff(diff)
                if op != "delete" or flow.key not in keep]  # fmt: skip

    def dump(self) -> list[str]:
        """The bridge's flows as `ovs-ofctl dump-flows --no-stats` prints them."""
        text = self._ofctl("dump-flows", "--no-stats", self.remote)
        return [line.strip() for line in text.splitlines() if "actions=" in line]
