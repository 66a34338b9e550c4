//! PyO3 binding of the Loom rule engine (`loom_ddlog._native`).
