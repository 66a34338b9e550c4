"""A `Universal_Flow` row's flow texts as the physical controller keeps them: packed into
one object a row (`pack`, `unpack`), a port's own flows deflated (`Deflater`). Pure: the
universal replica (`loom_physical.universal`) packs, the images (`loom_physical.images`)
unpack.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable
from collections.abc import Set as AbstractSet

FlowTexts = str | bytes | tuple[str, ...]
"""A `Universal_Flow` row's `flows` or `local_flows` as the replica keeps it (`pack`)."""


def pack(texts: Iterable[str], *, deflate: bool = False) -> FlowTexts:
    """A set of flow texts as one object: sorted and joined by newlines into one string
    (a tuple if a text has a newline of its own, and for no text at all). A physical
    controller holds every universal flow's text (1.84M at S=1.0): as strings in a set a
    row they cost more for every flow (a string's header, a set's slots).

    `deflate`: a long string naming no identifier (`${...}`) is kept compressed instead
    (bytes; `Deflater`). For a port's own flows (`local_flows`): 63,000 rows of ~1.7 kB at
    S=1.0, read again only when a node takes the port's part; deflated with the first such
    text as the dictionary, a fraction of their size, for a little CPU a row."""
    ordered = sorted(texts)
    if not ordered:
        return ()
    joined = "\n".join(ordered)
    if joined.count("\n") != len(ordered) - 1:
        return tuple(ordered)
    if deflate and len(joined) >= DEFLATED_FROM and "${" not in joined:
        return DEFLATER.deflate(joined)
    return joined


def unpack(value: FlowTexts | AbstractSet[str]) -> Collection[str]:
    """The texts `pack` packed (a set is given back as it is)."""
    if isinstance(value, bytes):
        return DEFLATER.inflate(value).split("\n")
    return value.split("\n") if isinstance(value, str) else value


DEFLATED_FROM = 256
"""Characters from which `pack(deflate=True)` compresses a text."""


class Deflater:
    """Texts compressed with a preset dictionary: the first text it compresses, kept for
    the process's life (texts alike in form -- a port's flows are its neighbours' but for
    keys, addresses and uuids -- then cost a seventh of their length)."""

    def __init__(self) -> None:
        self._zdict: dict[int, bytes] = {}
        """0 -> the dictionary, once set (`dict.setdefault` sets it once, whichever thread
        comes first: it is atomic)."""

    def deflate(self, text: str) -> bytes:
        """`text` compressed."""
        data = text.encode()
        zdict = self._zdict.get(0) or self._zdict.setdefault(0, data[-32768:])  # (zlib's window)
        compressor = zlib.compressobj(1, zdict=zdict)
        return compressor.compress(data) + compressor.flush()

    def inflate(self, data: bytes) -> str:
        """What `deflate` compressed."""
        assert 0 in self._zdict, "inflate before any deflate"
        decompressor = zlib.decompressobj(zdict=self._zdict[0])
        return (decompressor.decompress(data) + decompressor.flush()).decode()


DEFLATER = Deflater()
"""The process's one `Deflater` (its dictionary is set once, by the first text)."""
