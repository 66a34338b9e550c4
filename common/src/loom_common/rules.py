"""Where a controller's rule files are: the source tree or its installed wheel."""

from __future__ import annotations

from pathlib import Path


def rules_dir(module_file: str, concept: str, main: str) -> Path:
    """The directory holding `main` for the controller package of `module_file`:
    `rules/<concept>/` of the source tree (the package at `<root>/<component>/src/<pkg>/`),
    or `rules/` inside the installed package (the wheel force-includes it there).

    Raises:
        FileNotFoundError: neither has `main`.
    """
    here = Path(module_file).resolve()
    candidates = (here.parents[3] / "rules" / concept, here.parent / "rules")
    for candidate in candidates:
        if (candidate / main).is_file():
            return candidate
    raise FileNotFoundError(f"{main} not found under {' or '.join(map(str, candidates))}")
