"""Loom's logical controller: configuration in, universal flows out.

Data flow (DESIGN.md, "Data flow"): the config DB (`Loom_Config`, written by the API) is
replicated here by an OVSDB IDL (`config.py`); every change becomes one transaction of the
rule engine (`loom_ddlog`) running `rules/logical/*.dl` about the rows that changed; the
output deltas are written to the universal-flow DB (`Loom_Universal`) by `writer.py`, only
for the shards this controller masters (`loom_common.cluster.membership`), each write fenced
by the shard's epoch so a deposed master cannot write.

Modules:

- `inputs`: the engine's input relations, derived from the config schema (and the
  generator of `rules/logical/config.dl`); row -> tuple conversion.
- `outputs`: the engine's output relations -> universal DB rows, and their shard.
- `rules`: where the rule files are.
- `controller`: the daemon: config IDL -> engine -> writer, realization, warnings.
- `writer`: the universal-DB writer (deltas, reconciliation on takeover, fencing).
"""
