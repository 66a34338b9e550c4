"""Schema files carry a correct checksum, and content never changes under a released version."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, compute_cksum, schema_info, schema_path
from loom_schemas.versions import RELEASED

SCHEMAS = [CONFIG_SCHEMA, UNIVERSAL_SCHEMA]


@pytest.mark.parametrize("name", SCHEMAS)
def test_declared_cksum_matches_content(name: str) -> None:
    info = schema_info(schema_path(name))
    assert info.declared_cksum == info.actual_cksum, (
        f"{name}: cksum is {info.declared_cksum!r} but the content sums to "
        f"{info.actual_cksum!r}; bump the version and update the cksum"
    )


@pytest.mark.parametrize("name", SCHEMAS)
def test_released_version_content_is_frozen(name: str) -> None:
    info = schema_info(schema_path(name))
    released = RELEASED[info.name]
    assert info.version in released, f"{name}: version {info.version} is not in versions.py"
    assert released[info.version] == info.actual_cksum, (
        f"{name}: content changed under released version {info.version}; bump the version"
    )


def test_cksum_equals_posix_cksum_tool() -> None:
    path = schema_path(CONFIG_SCHEMA)
    text = path.read_bytes()
    body = b"".join(line for line in text.splitlines(keepends=True) if b'"cksum":' not in line)
    tool = shutil.which("cksum")
    assert tool is not None
    out = subprocess.run([tool], input=body, capture_output=True, check=True).stdout.split()
    assert compute_cksum(text) == f"{out[0].decode()} {out[1].decode()}"


def test_edit_changes_cksum() -> None:
    text = schema_path(CONFIG_SCHEMA).read_bytes()
    assert compute_cksum(text) != compute_cksum(text.replace(b'"tenant"', b'"tenant_id"', 1))


@pytest.mark.ovs
@pytest.mark.parametrize("name", SCHEMAS)
def test_ovsdb_tool_accepts_schema(tmp_path: pytest.TempPathFactory, name: str) -> None:
    tool = shutil.which("ovsdb-tool")
    assert tool is not None, "ovsdb-tool missing: apt-get install openvswitch-switch"
    db = f"{tmp_path}/c.db"
    subprocess.run([tool, "create", db, str(schema_path(name))], check=True)
    out = subprocess.run([tool, "db-version", db], capture_output=True, check=True, text=True)
    assert out.stdout.strip() == schema_info(schema_path(name)).version


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_table_and_column_is_documented(name: str) -> None:
    doc = schema_path(name).with_suffix(".md").read_text()
    sections = {
        chunk.split("\n", 1)[0].split(" (")[0].strip(): chunk for chunk in doc.split("\n## ")[1:]
    }
    shared = doc.split("\n## ", 1)[0]
    schema = json.loads(schema_path(name).read_text())
    missing = []
    for table, spec in schema["tables"].items():
        section = sections.get(table)
        if section is None:
            missing.append(table)
            continue
        for column in spec["columns"]:
            if f"`{column}`" not in section and f"`{column}`" not in shared:
                missing.append(f"{table}.{column}")
    assert not missing, f"undocumented in {schema_path(name).with_suffix('.md').name}: {missing}"
