"""Certificates for transport nodes and Loom's controllers, and whom a TLS peer is.

Open vSwitch's PKI (`ovs-pki`, Debian's `openvswitch-common`) has two certificate
authorities: `switchca` signs the nodes' certificates and `controllerca` the controllers'.
A node trusts `controllerca` (its `ovs-vsctl set-ssl ... CACERT`); a physical controller
trusts `switchca` and takes a node for the one its certificate names: the certificate's
common name must be the node's `system-id` (`names_node`), so a node cannot speak for
another. `Pki` creates the authorities once in its directory (or uses those there) and
issues certificates into `DIR/certs/` (again only when missing); `server_context` and
`client_context` make the `ssl` contexts the two ends use. (Wiring: the physical
controller's `pssl:` listener and the nodes' `ssl:` managers; the nodes' `pssl:` OpenFlow
listeners and the controller's channels; Loom's databases' `pssl:` ports, their RAFT
traffic and their clients on other hosts, with `internal` credentials.)
"""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loom_common.errors import LoomError

Kind = Literal["switch", "controller"]
"""Whose certificate: a transport node's (`switch`) or a controller's."""


class PkiError(LoomError):
    """Creating the authorities or a certificate failed."""

    message = "%(detail)s"


@dataclass(frozen=True)
class Credentials:
    """One end's private key and certificate, and the CA certificate its peers must be
    signed by."""

    private_key: Path
    certificate: Path
    peer_ca: Path


class Pki:
    """The authorities and certificates in one directory (see the module docstring)."""

    def __init__(self, directory: Path, *, tool: str = "ovs-pki") -> None:
        self.directory = directory.resolve()
        self._tool = tool

    def ca_certificate(self, kind: Kind) -> Path:
        """The certificate of the authority that signs `kind` certificates."""
        return self.directory / f"{kind}ca" / "cacert.pem"

    def ensure(self) -> Pki:
        """Create both authorities unless they exist.

        Raises:
            PkiError: `ovs-pki init` failed.
        """
        if not (self.ca_certificate("switch").exists()
                and self.ca_certificate("controller").exists()):  # fmt: skip
            self.directory.mkdir(parents=True, exist_ok=True)
            self._run("--force", "init")
        return self

    def issue(self, name: str, kind: Kind) -> Credentials:
        """A private key and certificate for `name` (a node's `system-id`, a controller's
        name) signed by the `kind` authority, made unless they exist.

        Raises:
            PkiError: `name` is not a plain name, or `ovs-pki req+sign` failed.
        """
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise PkiError(detail=f"certificate name {name!r}: letters, digits, '-', '_', '.'")
        certs = self.directory / "certs"
        key, cert = certs / f"{name}-privkey.pem", certs / f"{name}-cert.pem"
        if not (key.exists() and cert.exists()):
            certs.mkdir(parents=True, exist_ok=True)
            self._run("--force", "-u", "req+sign", name, kind, cwd=certs)
            (certs / f"{name}-req.pem").unlink(missing_ok=True)
        peer: Kind = "controller" if kind == "switch" else "switch"
        return Credentials(key, cert, self.ca_certificate(peer))

    def internal(self, name: str) -> Credentials:
        """Credentials for one of Loom's own processes talking to another (a database and
        its clients on other hosts, RAFT members): a `controller` certificate, trusting
        only `controllerca`, so no node's certificate reaches a database.

        Raises:
            PkiError: as `issue`.
        """
        mine = self.issue(name, "controller")
        return Credentials(mine.private_key, mine.certificate, self.ca_certificate("controller"))

    def _run(self, *args: str, cwd: Path | None = None) -> None:
        done = subprocess.run(
            [self._tool, f"--dir={self.directory}", f"--log={self.directory / 'ovs-pki.log'}",
             *args],
            capture_output=True, text=True, cwd=cwd, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise PkiError(detail=f"ovs-pki {' '.join(args)}: {done.stderr.strip()}")


def server_context(credentials: Credentials) -> ssl.SSLContext:
    """TLS for the end that listens (a physical controller for its nodes): it presents its
    certificate and requires the peer's, signed by `peer_ca`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(credentials.certificate, credentials.private_key)
    context.load_verify_locations(credentials.peer_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(credentials: Credentials) -> ssl.SSLContext:
    """TLS for the end that connects: it presents its certificate and requires the peer's,
    signed by `peer_ca`. Peers are known by their certificate's name (`peer_name`), not by
    host names: OVS's certificates carry none."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.load_cert_chain(credentials.certificate, credentials.private_key)
    context.load_verify_locations(credentials.peer_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def peer_name(sock: ssl.SSLSocket) -> str | None:
    """The common name of the verified certificate the peer presented (None: none)."""
    cert = sock.getpeercert()
    if not cert:
        return None
    subject: tuple[tuple[tuple[str, str], ...], ...] = cert.get("subject", ())  # type: ignore[assignment]
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def names_node(common_name: str | None, system_id: str | None) -> bool:
    """A node's certificate (`common_name`) names the node it says it is (`system_id`)."""
    return bool(common_name) and bool(system_id) and common_name == system_id
