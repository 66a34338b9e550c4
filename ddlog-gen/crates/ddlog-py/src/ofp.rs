//! The `OpenFlow` table encoder (`ofenc`) for Python: `loom_ovs.openflow.bulk_adds`' fast path.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

/// Flows `(table, priority, cookie, match, encoded actions)` as messages of the bulk bundle
/// (`ofenc::bundle_add_flow`), one after another. Raises `ValueError` naming the first
/// match the encoder declines (the caller encodes the flows the reference way), and
/// `OverflowError`/`TypeError` for a number out of range or a wrong type.
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // PyO3 extracts arguments by value
pub fn bulk_adds<'py>(
    py: Python<'py>,
    flows: Vec<Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::with_capacity(flows.len() * 160);
    for flow in &flows {
        let table: u8 = flow.get_item(0)?.extract()?;
        let priority: u16 = flow.get_item(1)?.extract()?;
        let cookie: u64 = flow.get_item(2)?.extract()?;
        let matched = flow.get_item(3)?;
        let matched = matched.cast::<PyString>()?.to_str()?;
        let actions = flow.get_item(4)?;
        let actions = actions.cast::<PyBytes>()?.as_bytes();
        ofenc::bundle_add_flow(&mut out, table, priority, cookie, matched, actions)
            .map_err(|declined| PyValueError::new_err(declined.to_string()))?;
    }
    Ok(PyBytes::new(py, &out))
}

/// One `OFPT_FLOW_MOD` with xid 0 (`ofenc::flow_mod`): `loom_ovs.openflow.encode`'s fast
/// path. Raises `ValueError` if the encoder declines the match.
#[pyfunction]
pub fn flow_mod<'py>(
    py: Python<'py>,
    command: u8,
    table: u8,
    priority: u16,
    cookie: u64,
    matched: &str,
    actions: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let message = ofenc::flow_mod(command, table, priority, cookie, matched, actions)
        .map_err(|declined| PyValueError::new_err(declined.to_string()))?;
    Ok(PyBytes::new(py, &message))
}

/// An `ovs-ofctl` action list as `OpenFlow` actions (`ofenc::encode_actions`). Raises
/// `ValueError` if the encoder declines it.
#[pyfunction]
pub fn encode_actions<'py>(py: Python<'py>, actions: &str) -> PyResult<Bound<'py, PyBytes>> {
    let encoded = ofenc::encode_actions(actions)
        .map_err(|declined| PyValueError::new_err(declined.to_string()))?;
    Ok(PyBytes::new(py, &encoded))
}
