//! Records applied transactions as a `.dat` script that replays to the same state:
//! `start;`, one `insert R(...)`/`delete R(...)`/... line per update as applied, then
//! `commit;`. Failed transactions are not recorded.
