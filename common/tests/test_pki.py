"""Certificates with ovs-pki, and TLS between a controller and nodes that checks who is who."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from loom_common.pki import (
    Credentials,
    Pki,
    PkiError,
    client_context,
    names_node,
    peer_name,
    server_context,
)


def _handshake(server: Credentials, client: Credentials) -> tuple[str | None, str | None]:
    """A TLS handshake over loopback; (the name the server saw, the name the client saw),
    or raise what the client's side raised."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, str | None] = {}

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_context(server).wrap_socket(conn, server_side=True) as tls:
                seen["server"] = peer_name(tls)
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError):
            seen["server"] = None
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname(), timeout=10) as raw, \
                client_context(client).wrap_socket(raw) as tls:  # fmt: skip
            seen["client"] = peer_name(tls)
            assert tls.recv(2) == b"ok"
    finally:
        thread.join(timeout=10)
        listener.close()
    return seen.get("server"), seen.get("client")


def test_issued_certificates_name_their_owners_and_each_side_checks_the_other(
    tmp_path: Path,
) -> None:
    pki = Pki(tmp_path / "pki").ensure()
    controller = pki.issue("physical-0", "controller")
    node = pki.issue("hv1", "switch")
    assert node.peer_ca == pki.ca_certificate("controller")
    assert controller.peer_ca == pki.ca_certificate("switch")
    assert _handshake(controller, node) == ("hv1", "physical-0")
    # issued once: the same files again
    assert pki.issue("hv1", "switch") == node
    before = node.certificate.read_bytes()
    Pki(tmp_path / "pki").ensure().issue("hv1", "switch")
    assert node.certificate.read_bytes() == before


def test_a_node_of_another_pki_is_refused(tmp_path: Path) -> None:
    ours = Pki(tmp_path / "ours").ensure()
    theirs = Pki(tmp_path / "theirs").ensure()
    controller = ours.issue("physical-0", "controller")
    stranger = theirs.issue("hv1", "switch")
    # (the stranger trusts our controller, but our controller does not trust its CA)
    stranger = Credentials(stranger.private_key, stranger.certificate,
                           ours.ca_certificate("controller"))  # fmt: skip
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        _handshake(controller, stranger)


def test_a_node_certificate_must_name_the_node() -> None:
    assert names_node("hv1", "hv1")
    assert not names_node("hv2", "hv1")
    assert not names_node(None, "hv1")
    assert not names_node("hv1", None)


def test_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(PkiError, match="certificate name"):
        Pki(tmp_path).issue("../etc", "switch")
