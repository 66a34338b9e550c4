"""Loom's lab: what measures and exercises Loom, apart from the product packages.

- `physical_bench`, `logical_bench`, `api_bench` (and `api_bench_hostile`): the commands
  `loom-physical-bench`, `loom-logical-bench`, `loom-api-bench` (docs/benchmarks.md).
- `workload`: the NVP paper's controller workload, generated or read from a file
  (`loom-workload`).
- `standin`: stand-in transport nodes, thousands in one process, that dial the physical
  controllers as real nodes do (`python -m loom_lab.standin`).
- `demo`: what `loom up --demo` runs (found by `loom_common.cli` through the `loom.demo`
  entry-point group this member declares: the product does not depend on the lab).
- `soak`: the demo's sandbox started many times in a row (`python -m loom_lab.soak`).

No product package imports this one (`tests/test_imports.py`).
"""
