"""Every released schema version and its checksum; a changed schema needs a new line here.

`tests/test_cksum.py` fails when a schema's content changed (its checksum differs) while its
version stayed the same: bump `version` in the `.ovsschema`, update its `cksum`, and add the
pair below. Old lines stay — they are the history upgrades are checked against.
"""

from __future__ import annotations

RELEASED: dict[str, dict[str, str]] = {
    "Loom_Config": {
        "1.0.0": "13753675 13518",
        "1.1.0": "96155693 13826",
        "1.2.0": "818501434 13846",
        "1.3.0": "870187412 14280",
    },
    "Loom_Universal": {
        "1.0.0": "4140731774 10959",
        "1.1.0": "1620949981 10534",
        "1.2.0": "3752900491 10796",
        "1.3.0": "3152485475 12080",
        "1.4.0": "3182875413 12112",
    },
}
