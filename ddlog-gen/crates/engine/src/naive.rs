//! A from-scratch reference evaluator of the IR: the oracle for randomized tests and the
//! baseline for benchmarks. Simple on purpose; never used on the hot path.
