//! The receiving side of a bulk bundle, for the benchmark's stand-in nodes
//! (`loom_lab.standin.switch`): the run of `OFPT_BUNDLE_ADD_MESSAGE`s that carry flow adds
//! into one open bundle, and a flow add cut into the (key, value) a stand-in keeps.
//!
//! A full-scale cold start sends 3,000 stand-ins 7M flow adds; read and kept one by one in
//! Python they took more than half the stand-ins' CPU, which the benchmark's two cores
//! share with the controllers it measures. These functions check and cut exactly
//! what the Python fast path did (`Connection.receive`, `Connection._apply`, which stay for
//! everything else), so a stand-in answers the same either way.

use crate::{OFPFC_ADD, OFPT_BUNDLE_ADD_MESSAGE, OFPT_FLOW_MOD, VERSION};

/// `OFPFC_MODIFY_STRICT`.
const MODIFY_STRICT: u8 = 2;
/// `OFPTT_ALL`.
const TABLE_ALL: u8 = 0xff;
/// Where a `FLOW_MOD`'s `ofp_match` starts: after the header (8) and the fixed fields (40).
const MATCH_AT: usize = 48;
/// A `BUNDLE_ADD_MESSAGE`'s own fields before the message it carries.
const ADD_HEADER: usize = 16;

fn be16(bytes: &[u8], at: usize) -> usize {
    usize::from(bytes[at]) << 8 | usize::from(bytes[at + 1])
}

/// Where a `FLOW_MOD`'s match ends (its padded length after `MATCH_AT`); needs
/// `MATCH_AT + 4` bytes.
fn match_end(message: &[u8]) -> usize {
    MATCH_AT + ((be16(message, MATCH_AT + 2) + 7) & !7)
}

/// The run of bundle messages in `buf` from `at`: each one whole, an
/// `OFPT_BUNDLE_ADD_MESSAGE` of bundle `bundle_id` with `flags`, carrying a `FLOW_MOD`
/// whose command is add or strict modify, of one table (not all), with the add's xid and
/// version and a match that fits in it -- the checks `Connection._bundle_add` makes of
/// such a message. Returns the carried messages' ranges and where the run ends (`at` when
/// the first message is not one of them: the caller reads it the general way).
#[must_use]
pub fn bundle_add_run(
    buf: &[u8],
    mut at: usize,
    bundle_id: u32,
    flags: u16,
) -> (Vec<(usize, usize)>, usize) {
    let mut found = Vec::new();
    let id = bundle_id.to_be_bytes();
    let flags = flags.to_be_bytes();
    while buf.len().saturating_sub(at) >= ADD_HEADER + MATCH_AT + 8 {
        let m = &buf[at..];
        let length = be16(m, 2);
        if length < ADD_HEADER + MATCH_AT + 8 || length > m.len() {
            break;
        }
        let inner_length = be16(m, 18);
        let (command, table) = (m[41], m[40]);
        let fits = (MATCH_AT + 8..=length - ADD_HEADER).contains(&inner_length)
            && match_end(&m[ADD_HEADER..]) <= inner_length;
        let ours = m[0] == VERSION
            && m[1] == OFPT_BUNDLE_ADD_MESSAGE
            && m[8..12] == id
            && m[14..16] == flags
            && m[16] == VERSION
            && m[17] == OFPT_FLOW_MOD
            && m[20..24] == m[4..8]
            && (command == OFPFC_ADD || command == MODIFY_STRICT)
            && table != TABLE_ALL;
        if !(ours && fits) {
            break;
        }
        found.push((at + ADD_HEADER, at + ADD_HEADER + inner_length));
        at += length;
    }
    (found, at)
}

/// A `FLOW_MOD` add as a stand-in keeps it: key `table | priority | match`, value
/// `cookie | instructions` (`loom_lab.standin.flows`). None for another message, another
/// command, or a match longer than the message (the caller handles those).
#[must_use]
pub fn flow_add(message: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if message.len() < MATCH_AT + 8 || message[1] != OFPT_FLOW_MOD || message[25] != OFPFC_ADD {
        return None;
    }
    let end = match_end(message);
    if end > message.len() {
        return None;
    }
    let mut key = Vec::with_capacity(3 + end - MATCH_AT);
    key.push(message[24]);
    key.extend_from_slice(&message[30..32]);
    key.extend_from_slice(&message[MATCH_AT..end]);
    let mut value = Vec::with_capacity(8 + message.len() - end);
    value.extend_from_slice(&message[8..16]);
    value.extend_from_slice(&message[end..]);
    Some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_mod;

    /// A `BUNDLE_ADD_MESSAGE` of bundle 7 (flags 3) carrying `inner`, with `inner`'s xid.
    fn bundle_add(inner: &[u8]) -> Vec<u8> {
        let length = u16::try_from(ADD_HEADER + inner.len()).unwrap();
        let mut m = vec![VERSION, OFPT_BUNDLE_ADD_MESSAGE];
        m.extend_from_slice(&length.to_be_bytes());
        m.extend_from_slice(&inner[4..8]);
        m.extend_from_slice(&7u32.to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 3]);
        m.extend_from_slice(inner);
        m
    }

    fn add(priority: u16) -> Vec<u8> {
        flow_mod(OFPFC_ADD, 3, priority, 9, "in_port=5", b"").unwrap()
    }

    #[test]
    fn a_run_stops_at_another_bundle_a_partial_message_or_a_delete() {
        let (a, b) = (add(10), add(20));
        let mut buf = [bundle_add(&a), bundle_add(&b)].concat();
        let whole = buf.len();
        let (found, end) = bundle_add_run(&buf, 0, 7, 3);
        assert_eq!(end, whole);
        assert_eq!(
            found.iter().map(|&(s, e)| &buf[s..e]).collect::<Vec<_>>(),
            [&a[..], &b[..]]
        );
        assert_eq!(bundle_add_run(&buf, 0, 8, 3), (vec![], 0), "another bundle");
        assert_eq!(bundle_add_run(&buf, 0, 7, 1), (vec![], 0), "other flags");
        buf.extend_from_slice(&bundle_add(&add(30))[..40]); // not whole yet
        assert_eq!(bundle_add_run(&buf, 0, 7, 3).1, whole);
        let delete = flow_mod(3, 3, 1, 0, "in_port=5", b"").unwrap(); // OFPFC_DELETE
        let buf = [bundle_add(&a), bundle_add(&delete)].concat();
        assert_eq!(bundle_add_run(&buf, 0, 7, 3).1, whole / 2);
    }

    #[test]
    fn a_flow_add_is_cut_into_its_key_and_value() {
        let m = add(10);
        let (key, value) = flow_add(&m).unwrap();
        let end = match_end(&m);
        assert_eq!(key, [&m[24..25], &m[30..32], &m[MATCH_AT..end]].concat());
        assert_eq!(value, [&m[8..16], &m[end..]].concat());
        let delete = flow_mod(3, 3, 1, 0, "in_port=5", b"").unwrap();
        assert_eq!(flow_add(&delete), None);
        assert_eq!(flow_add(&m[..MATCH_AT + 4]), None);
    }
}
