//! The `OpenFlow` table encoder (`ofenc`) for Python: `loom_ovs.openflow.bulk_adds`' fast path;
//! and its reading side for the benchmark's stand-in nodes (`loom_lab.standin.switch`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyBytes, PyDict, PyList, PyString, PyTuple};

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

/// The run of flow adds into open bundle `bundle_id` (with `flags`) in `buf` from `at`
/// (`ofenc::standin::bundle_add_run`): the messages they carry, and where the run ends
/// (`at` if the message there is not one of them).
#[pyfunction]
pub fn standin_bundle_adds<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyBytes>,
    at: usize,
    bundle_id: u32,
    flags: u16,
) -> PyResult<(Vec<Bound<'py, PyBytes>>, usize)> {
    let bytes = buf.as_bytes();
    if at > bytes.len() {
        return Err(PyValueError::new_err("at is past the end of buf"));
    }
    let (found, end) = ofenc::standin::bundle_add_run(bytes, at, bundle_id, flags);
    let messages = found
        .into_iter()
        .map(|(s, e)| PyBytes::new(py, &bytes[s..e]))
        .collect();
    Ok((messages, end))
}

/// Keep the flow adds of `messages` from index `start` in `flows` (key -> value, as
/// `ofenc::standin::flow_add` cuts them), each byte string first looked up in `intern`
/// (if given: the same bytes shared by every node that has them); stop at the first
/// message that is not a flow add and return its index (`len(messages)` if none).
#[pyfunction]
#[pyo3(signature = (messages, start, flows, intern=None))]
pub fn standin_apply_adds<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyList>,
    start: usize,
    flows: &Bound<'py, PyDict>,
    intern: Option<&Bound<'py, PyDict>>,
) -> PyResult<usize> {
    let interned = |bytes: Vec<u8>| -> PyResult<Bound<'py, PyAny>> {
        let item = PyBytes::new(py, &bytes).into_any();
        let Some(shared) = intern else {
            return Ok(item);
        };
        if let Some(found) = shared.get_item(&item)? {
            return Ok(found);
        }
        shared.set_item(&item, &item)?;
        Ok(item)
    };
    let mut at = start;
    while at < messages.len() {
        let message = messages.get_item(at)?;
        let Some((key, value)) = ofenc::standin::flow_add(message.cast::<PyBytes>()?.as_bytes())
        else {
            break;
        };
        flows.set_item(interned(key)?, interned(value)?)?;
        at += 1;
    }
    Ok(at)
}
