"""Test packets as hex, for `netdev-dummy/receive` (which takes hex or an ODP flow; an ODP
flow names the datapath port, which tests do not know), and the frames a dummy port's
capture holds.

Only what the tests send: Ethernet with an optional VLAN tag, ARP requests, IPv4 with
ICMP echo, UDP or TCP (a SYN). Checksums are filled in (the receiving VM's pipeline does not
care, but a capture read by tcpdump does).
"""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path


def _mac(text: str) -> bytes:
    return bytes(int(part, 16) for part in text.split(":"))


def _ip(text: str) -> bytes:
    return ipaddress.IPv4Address(text).packed


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ethernet(src: str, dst: str, ethertype: int, payload: bytes, vlan: int | None = None) -> str:
    """An Ethernet frame as hex (padded to 60 bytes)."""
    header = _mac(dst) + _mac(src)
    if vlan is not None:
        header += struct.pack("!HH", 0x8100, vlan & 0xFFF)
    frame = header + struct.pack("!H", ethertype) + payload
    return frame.ljust(60, b"\0").hex()


def arp_request(src_mac: str, src_ip: str, target_ip: str) -> str:
    """A broadcast ARP request from (src_mac, src_ip) for target_ip."""
    body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)
    body += _mac(src_mac) + _ip(src_ip) + b"\0" * 6 + _ip(target_ip)
    return ethernet(src_mac, "ff:ff:ff:ff:ff:ff", 0x0806, body)


def _ipv4(src: str, dst: str, proto: int, payload: bytes, ttl: int) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, ttl, proto, 0,
                         _ip(src), _ip(dst))  # fmt: skip
    header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
    return header + payload


def icmp_echo(
    src_mac: str, dst_mac: str, src: str, dst: str, *, ttl: int = 64, vlan: int | None = None
) -> str:
    """An ICMP echo request (tagged with `vlan` if given)."""
    body = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"loom"
    body = body[:2] + struct.pack("!H", _checksum(body)) + body[4:]
    return ethernet(src_mac, dst_mac, 0x0800, _ipv4(src, dst, 1, body, ttl), vlan=vlan)


def udp(src_mac: str, dst_mac: str, src: str, dst: str, sport: int, dport: int) -> str:
    """A UDP datagram (checksum 0: none)."""
    body = struct.pack("!HHHH", sport, dport, 8 + 4, 0) + b"loom"
    return ethernet(src_mac, dst_mac, 0x0800, _ipv4(src, dst, 17, body, 64))


def tcp_syn(src_mac: str, dst_mac: str, src: str, dst: str, sport: int, dport: int) -> str:
    """A TCP SYN."""
    header = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = _ip(src) + _ip(dst) + struct.pack("!BBH", 0, 6, len(header))
    header = header[:16] + struct.pack("!H", _checksum(pseudo + header)) + header[18:]
    return ethernet(src_mac, dst_mac, 0x0800, _ipv4(src, dst, 6, header, 64))


def read_pcap(path: Path) -> list[bytes]:
    """The frames of a pcap file as OVS's dummy ports write it (`options:tx_pcap`); none if
    the file does not exist yet (nothing was sent)."""
    data = path.read_bytes() if path.exists() else b""
    frames, offset = [], 24  # the global header
    while offset + 16 <= len(data):
        length = struct.unpack("<I", data[offset + 8 : offset + 12])[0]
        frames.append(data[offset + 16 : offset + 16 + length])
        offset += 16 + length
    return frames
