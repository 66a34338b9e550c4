//! Records applied transactions as a `.dat` script that replays to the same state.
