"""The base exception of Loom's shared code: templated messages filled from keyword arguments."""

from __future__ import annotations

from typing import Any, ClassVar


class LoomError(Exception):
    """Base for Loom errors; subclasses set `message`, a %-template filled from kwargs."""

    message: ClassVar[str] = "unknown error"

    def __init__(self, **kw: Any) -> None:
        super().__init__(self.message % kw)
        self.kw = kw
