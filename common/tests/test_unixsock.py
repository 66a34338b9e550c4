"""Unix sockets at paths longer than `sockaddr_un` holds: bound and reached all the same."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from loom_common import unixsock


def test_a_path_past_sockaddr_un_is_bound_and_reached(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "db.sock")
    assert len(path) > unixsock.SUN_PATH_MAX
    with socket.socket(socket.AF_UNIX) as plain, pytest.raises(OSError, match="too long"):
        plain.connect(path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        unixsock.bind(listener, path)
        listener.listen(1)
        assert Path(path).is_socket()
        with unixsock.connect(path, timeout=5.0) as client:
            peer, _ = listener.accept()
            with peer:
                client.sendall(b"hello")
                assert peer.recv(5) == b"hello"


def test_nothing_listening_is_an_error(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with pytest.raises(FileNotFoundError):
        unixsock.connect(str(deep / "none.sock"), timeout=1.0)
