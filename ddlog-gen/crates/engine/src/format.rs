//! DDlog's text format for values and records: `R{.a = 1, .b = "x"}`.
