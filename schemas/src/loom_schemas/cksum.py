"""OVSDB schema checksums, computed the way OVS and OVN compute them.

OVN's `build-aux/cksum-schema-check` deletes the `"cksum": "N M",` line and runs POSIX
`cksum` (CRC-32 with the length appended, then complemented) over what is left. The same
algorithm is written out here so the check needs no shell.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_CKSUM_LINE = re.compile(rb'^[ \t]*"cksum": *"[0-9]+ [0-9]+",\n', re.MULTILINE)


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        table.append(crc & 0xFFFFFFFF)
    return table


_TABLE = _crc_table()


def _posix_cksum(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[(crc >> 24) ^ byte]
    length = len(data)
    while length:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[(crc >> 24) ^ (length & 0xFF)]
        length >>= 8
    return ~crc & 0xFFFFFFFF


def compute_cksum(text: bytes) -> str:
    """Return the `"CRC LENGTH"` checksum of a schema file's bytes, its cksum line removed."""
    body = _CKSUM_LINE.sub(b"", text, count=1)
    return f"{_posix_cksum(body)} {len(body)}"


@dataclass(frozen=True)
class SchemaInfo:
    """The identity of one schema file: its name, declared version and checksums."""

    name: str
    version: str
    declared_cksum: str
    actual_cksum: str


def schema_info(path: Path) -> SchemaInfo:
    """Read `path` and return its name, version, declared and computed checksums."""
    raw = path.read_bytes()
    doc = json.loads(raw)
    return SchemaInfo(
        name=doc["name"],
        version=doc["version"],
        declared_cksum=doc.get("cksum", ""),
        actual_cksum=compute_cksum(raw),
    )
