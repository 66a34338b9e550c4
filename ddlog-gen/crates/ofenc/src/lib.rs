//! `OpenFlow` 1.5 encoding of whole tables: the bytes a physical controller sends a node.
//!
//! A cold start at NVP's scale encodes every universal flow (1.45M in each physical
//! controller), and its matches nearly never repeat (each names its datapath and a port's
//! addresses); in Python that was ~18 us a flow, a fifth of a controller's cold start.
//! This crate encodes the matches and frames the messages; the actions, which flows share
//! (~10 flows per distinct list), stay with the Python encoder (`loom_ovs.ofp`), which is
//! the reference: for any match this crate encodes, the bytes are the same as Python's
//! (tested on every golden flow and on generated ones), and what it does not know it
//! declines ([`Declined`]) for Python to encode or refuse.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A match this encoder leaves to the reference encoder (unknown or malformed syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declined(pub String);

impl fmt::Display for Declined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not encoded here: {}", self.0)
    }
}

impl std::error::Error for Declined {}

type Result<T> = std::result::Result<T, Declined>;

/// How a field's values are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Mac,
    Ipv4,
    Ipv6,
    CtState,
}

/// One OXM/NXM field: class, code, width in bytes, value syntax.
#[derive(Clone, Copy)]
struct Field {
    name: &'static str,
    class: u16,
    code: u8,
    nbytes: usize,
    kind: Kind,
}

const OXM: u16 = 0x8000;
const NXM0: u16 = 0x0000;
const NXM1: u16 = 0x0001;
const PKT_REG: u16 = 0x8001;
const ERIC: u16 = 0x1000;

const fn f(name: &'static str, class: u16, code: u8, nbytes: usize, kind: Kind) -> Field {
    Field {
        name,
        class,
        code,
        nbytes,
        kind,
    }
}

/// The fields by their canonical name (`loom_ovs.ofp._fields`; registers apart).
const FIELDS: &[Field] = &[
    f("in_port", OXM, 0, 4, Kind::Int),
    f("metadata", OXM, 2, 8, Kind::Int),
    f("eth_dst", OXM, 3, 6, Kind::Mac),
    f("eth_src", OXM, 4, 6, Kind::Mac),
    f("eth_type", OXM, 5, 2, Kind::Int),
    f("vlan_vid", OXM, 6, 2, Kind::Int),
    f("vlan_pcp", OXM, 7, 1, Kind::Int),
    f("ip_dscp", OXM, 8, 1, Kind::Int),
    f("ip_proto", OXM, 10, 1, Kind::Int),
    f("ip_src", OXM, 11, 4, Kind::Ipv4),
    f("ip_dst", OXM, 12, 4, Kind::Ipv4),
    f("tcp_src", OXM, 13, 2, Kind::Int),
    f("tcp_dst", OXM, 14, 2, Kind::Int),
    f("udp_src", OXM, 15, 2, Kind::Int),
    f("udp_dst", OXM, 16, 2, Kind::Int),
    f("sctp_src", OXM, 17, 2, Kind::Int),
    f("sctp_dst", OXM, 18, 2, Kind::Int),
    f("icmp_type", OXM, 19, 1, Kind::Int),
    f("icmp_code", OXM, 20, 1, Kind::Int),
    f("arp_op", OXM, 21, 2, Kind::Int),
    f("arp_spa", OXM, 22, 4, Kind::Ipv4),
    f("arp_tpa", OXM, 23, 4, Kind::Ipv4),
    f("arp_sha", OXM, 24, 6, Kind::Mac),
    f("arp_tha", OXM, 25, 6, Kind::Mac),
    f("ipv6_src", OXM, 26, 16, Kind::Ipv6),
    f("ipv6_dst", OXM, 27, 16, Kind::Ipv6),
    f("icmpv6_type", OXM, 29, 1, Kind::Int),
    f("icmpv6_code", OXM, 30, 1, Kind::Int),
    f("nd_target", OXM, 31, 16, Kind::Ipv6),
    f("nd_sll", OXM, 32, 6, Kind::Mac),
    f("nd_tll", OXM, 33, 6, Kind::Mac),
    f("tun_id", OXM, 38, 8, Kind::Int),
    f("tun_src", NXM1, 31, 4, Kind::Ipv4),
    f("tun_dst", NXM1, 32, 4, Kind::Ipv4),
    f("tun_ipv6_src", NXM1, 109, 16, Kind::Ipv6),
    f("tun_ipv6_dst", NXM1, 110, 16, Kind::Ipv6),
    f("vlan_tci", NXM0, 4, 2, Kind::Int),
    f("nw_ttl", NXM1, 29, 1, Kind::Int),
    f("conj_id", NXM1, 37, 4, Kind::Int),
    f("pkt_mark", NXM1, 33, 4, Kind::Int),
    f("tun_metadata0", NXM1, 40, 4, Kind::Int),
    f("ct_state", NXM1, 105, 4, Kind::CtState),
    f("ct_zone", NXM1, 106, 2, Kind::Int),
    f("ct_mark", NXM1, 107, 4, Kind::Int),
    f("nd_reserved", ERIC, 1, 4, Kind::Int),
    f("nd_options_type", ERIC, 2, 1, Kind::Int),
];

/// Other names of fields (`ovs-ofctl`'s older spellings).
const ALIASES: &[(&str, &str)] = &[
    ("dl_dst", "eth_dst"),
    ("dl_src", "eth_src"),
    ("dl_type", "eth_type"),
    ("nw_src", "ip_src"),
    ("nw_dst", "ip_dst"),
    ("nw_proto", "ip_proto"),
    ("icmpv4_type", "icmp_type"),
    ("icmpv4_code", "icmp_code"),
];

/// `reg0`..`reg15`, `xreg0`..`xreg7`, `xxreg0`..`xxreg3`.
fn register(name: &str) -> Option<Field> {
    let (prefix, class, nbytes, count, base) = if let Some(n) = name.strip_prefix("xxreg") {
        (n, NXM1, 16, 4, 111)
    } else if let Some(n) = name.strip_prefix("xreg") {
        (n, PKT_REG, 8, 8, 0)
    } else if let Some(n) = name.strip_prefix("reg") {
        (n, NXM1, 4, 16, 0)
    } else {
        return None;
    };
    if prefix.is_empty() || prefix.len() > 2 || (prefix.len() > 1 && prefix.starts_with('0')) {
        return None;
    }
    let i: u8 = prefix.parse().ok()?;
    (i < count).then_some(Field {
        name: "reg",
        class,
        code: base + i,
        nbytes,
        kind: Kind::Int,
    })
}

/// A match name's field (canonical names, aliases, registers; not the `NXM_*` names, which
/// the reference knows and this encoder leaves to it).
fn field(name: &str) -> Option<Field> {
    let canonical = ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, c)| *c);
    FIELDS
        .iter()
        .find(|f| f.name == canonical)
        .copied()
        .or_else(|| register(canonical))
}

fn by_name(name: &str) -> Field {
    field(name).expect("a field of the table")
}

/// Python's `int(text, 0)` for the forms rules write (decimal, `0x`, `0o`, `0b`); anything
/// else declined.
fn int(text: &str) -> Result<u128> {
    let t = text.trim();
    let declined = || Declined(format!("{text:?} is not a number"));
    let (digits, radix) = match t.get(..2).map(str::to_ascii_lowercase).as_deref() {
        Some("0x") => (&t[2..], 16),
        Some("0o") => (&t[2..], 8),
        Some("0b") => (&t[2..], 2),
        _ => {
            if t.len() > 1 && t.starts_with('0') {
                return Err(declined()); // (Python refuses leading zeros)
            }
            (t, 10)
        }
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(declined());
    }
    u128::from_str_radix(digits, radix).map_err(|_| declined())
}

/// `value` as `nbytes` big-endian bytes (declined if it does not fit).
fn be(value: u128, nbytes: usize) -> Result<Vec<u8>> {
    if nbytes < 16 && value >> (nbytes * 8) != 0 {
        return Err(Declined(format!("{value} does not fit in {nbytes} bytes")));
    }
    Ok(value.to_be_bytes()[16 - nbytes..].to_vec())
}

const PORTS: &[(&str, u32)] = &[
    ("in_port", 0xFFFF_FFF8),
    ("local", 0xFFFF_FFFE),
    ("controller", 0xFFFF_FFFD),
    ("normal", 0xFFFF_FFFA),
    ("flood", 0xFFFF_FFFB),
    ("all", 0xFFFF_FFFC),
];

/// One value (no mask) as the field's bytes (`ofp._value`).
fn value(field: &Field, text: &str) -> Result<Vec<u8>> {
    let declined = || Declined(format!("{}: {text:?}", field.name));
    match field.kind {
        Kind::Mac => {
            let hex: String = text.chars().filter(|&c| c != ':').collect();
            if hex.len() != 12 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(declined());
            }
            (0..6)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| declined()))
                .collect()
        }
        Kind::Ipv4 => text
            .parse::<Ipv4Addr>()
            .map(|a| a.octets().to_vec())
            .map_err(|_| declined()),
        Kind::Ipv6 => text
            .parse::<Ipv6Addr>()
            .map(|a| a.octets().to_vec())
            .map_err(|_| declined()),
        Kind::Int | Kind::CtState => {
            if field.name == "in_port" {
                let lower = text.to_ascii_lowercase();
                if let Some((_, port)) = PORTS.iter().find(|(n, _)| *n == lower) {
                    return Ok(port.to_be_bytes().to_vec());
                }
            }
            be(int(text)?, field.nbytes)
        }
    }
}

/// `VALUE[/MASK]`, `ADDRESS/PREFIX` or `ct_state` flags (`ofp._value_mask`).
fn value_mask(field: &Field, text: &str) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    if field.kind == Kind::CtState {
        return ct_state(text);
    }
    let (v, mask) = text.split_once('/').map_or((text, ""), |(v, m)| (v, m));
    let raw = value(field, v)?;
    if mask.is_empty() {
        return Ok((raw, None));
    }
    let raw_mask = if matches!(field.kind, Kind::Ipv4 | Kind::Ipv6)
        && mask.chars().all(|c| c.is_ascii_digit())
    {
        let bits: usize = mask
            .parse()
            .map_err(|_| Declined(format!("prefix {mask:?}")))?;
        let width = field.nbytes * 8;
        if bits > width {
            return Err(Declined(format!("prefix /{bits} is too long")));
        }
        let mut m = vec![0u8; field.nbytes];
        for bit in 0..bits {
            m[bit / 8] |= 0x80 >> (bit % 8);
        }
        m
    } else {
        value(field, mask)?
    };
    if raw_mask.iter().all(|&b| b == 0xFF) {
        return Ok((raw, None));
    }
    let masked = raw.iter().zip(&raw_mask).map(|(a, b)| a & b).collect();
    Ok((masked, Some(raw_mask)))
}

const CT_FLAGS: &[(&str, u32)] = &[
    ("new", 0x01),
    ("est", 0x02),
    ("rel", 0x04),
    ("rpl", 0x08),
    ("inv", 0x10),
    ("trk", 0x20),
    ("snat", 0x40),
    ("dnat", 0x80),
];

/// `ct_state=+trk+est-rel` (or a plain 32-bit `VALUE[/MASK]`).
fn ct_state(text: &str) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    if !text.starts_with(['+', '-']) {
        return value_mask(&by_name("ct_mark"), text);
    }
    let (mut on, mut off) = (0u32, 0u32);
    // The reference takes every `[+-][a-z]+` in the text and ignores what lies between;
    // this encoder takes only text made of such flags.
    let mut rest = text;
    while let Some(sign) = rest.chars().next() {
        let body = &rest[1..];
        let end = body
            .find(|c: char| !c.is_ascii_lowercase())
            .unwrap_or(body.len());
        let name = &body[..end];
        let bit = CT_FLAGS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| Declined(format!("ct_state flag {name:?}")))?;
        match sign {
            '+' => on |= bit,
            '-' => off |= bit,
            _ => return Err(Declined(format!("ct_state {text:?}"))),
        }
        rest = &body[end..];
    }
    Ok((
        on.to_be_bytes().to_vec(),
        Some((on | off).to_be_bytes().to_vec()),
    ))
}

/// One OXM entry: header, value, mask.
fn oxm(field: &Field, raw: &[u8], mask: Option<&[u8]>) -> Vec<u8> {
    let masked = mask.is_some();
    let len = raw.len() * if masked { 2 } else { 1 };
    let header = u32::from(field.class) << 16
        | u32::from(field.code) << 9
        | u32::from(masked) << 8
        | len as u32;
    let mut out = header.to_be_bytes().to_vec();
    out.extend_from_slice(raw);
    if let Some(m) = mask {
        out.extend_from_slice(m);
    }
    out
}

const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", 0x0800, None),
    ("ipv6", 0x86DD, None),
    ("arp", 0x0806, None),
    ("icmp", 0x0800, Some(1)),
    ("icmp6", 0x86DD, Some(58)),
    ("tcp", 0x0800, Some(6)),
    ("tcp6", 0x86DD, Some(6)),
    ("udp", 0x0800, Some(17)),
    ("udp6", 0x86DD, Some(17)),
    ("sctp", 0x0800, Some(132)),
    ("sctp6", 0x86DD, Some(132)),
];

/// The field a match name means in this flow, and its prerequisite rank (`ofp._match_field`).
fn match_field(name: &str, eth_type: Option<u128>, proto: Option<u128>) -> Result<(Field, u8)> {
    match name {
        "tp_src" | "tp_dst" => {
            let l4 = match proto {
                Some(6) => "tcp",
                Some(17) => "udp",
                Some(132) => "sctp",
                _ => return Err(Declined(format!("{name} needs tcp, udp or sctp"))),
            };
            Ok((by_name(&format!("{l4}_{}", &name[3..])), 3))
        }
        "icmp_type" | "icmp_code" => {
            let full = if eth_type == Some(0x86DD) {
                format!("icmpv6_{}", &name[5..])
            } else {
                name.to_string()
            };
            Ok((by_name(&full), 2))
        }
        "nw_src" | "nw_dst" if eth_type == Some(0x0806) => Ok((
            by_name(if name == "nw_src" {
                "arp_spa"
            } else {
                "arp_tpa"
            }),
            3,
        )),
        "dl_vlan" => Ok((by_name("vlan_vid"), 3)),
        _ => field(name)
            .map(|f| (f, 3))
            .ok_or_else(|| Declined(format!("match field {name:?}"))),
    }
}

/// An `ofp_match` (OXM, padded to 8 bytes) for an `ovs-ofctl` match (`ofp.encode_match`).
pub fn encode_match(text: &str) -> Result<Vec<u8>> {
    let mut eth_type: Option<u128> = None;
    let mut proto: Option<u128> = None;
    let mut items: Vec<(String, &str)> = Vec::new();
    for part in text.split(',') {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => (n.trim().to_ascii_lowercase(), Some(v)),
            None => (part.trim().to_ascii_lowercase(), None),
        };
        if name.is_empty() {
            continue;
        }
        let Some(value) = value else {
            let (_, t, p) = SHORTHANDS
                .iter()
                .find(|(s, _, _)| *s == name)
                .ok_or_else(|| Declined(format!("{part:?} is not FIELD=VALUE")))?;
            eth_type = Some(u128::from(*t));
            if let Some(p) = p {
                proto = Some(u128::from(*p));
            }
            continue;
        };
        if name == "dl_type" || name == "eth_type" {
            eth_type = Some(int(value)?);
            continue;
        }
        if (name == "nw_proto" || name == "ip_proto") && eth_type != Some(0x0806) {
            proto = Some(int(value)?);
            continue;
        }
        items.push((name, value.trim()));
    }
    let mut entries: Vec<(u8, Vec<u8>)> = Vec::with_capacity(items.len() + 2);
    if let Some(t) = eth_type {
        entries.push((0, oxm(&by_name("eth_type"), &be(t, 2)?, None)));
    }
    if let Some(p) = proto {
        entries.push((1, oxm(&by_name("ip_proto"), &be(p, 1)?, None)));
    }
    for (name, value) in &items {
        let (field, rank) = match_field(name, eth_type, proto)?;
        let entry = if field.name == "vlan_vid" {
            oxm(&field, &be(int(value)? | 0x1000, 2)?, None)
        } else {
            let (raw, mask) = value_mask(&field, value)?;
            oxm(&field, &raw, mask.as_deref())
        };
        entries.push((rank, entry));
    }
    // Prerequisites first, then by header, stably: the reference's order.
    entries.sort_by(|a, b| (a.0, &a.1[..4]).cmp(&(b.0, &b.1[..4])));
    let body: Vec<u8> = entries.into_iter().flat_map(|(_, e)| e).collect();
    let length = 4 + body.len();
    let mut out = Vec::with_capacity(length + 7);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(length as u16).to_be_bytes());
    out.extend_from_slice(&body);
    out.resize(out.len() + (8 - length % 8) % 8, 0);
    Ok(out)
}

const VERSION: u8 = 0x06;
const OFPT_FLOW_MOD: u8 = 14;
const OFPT_BUNDLE_ADD_MESSAGE: u8 = 34;
const OFPFC_ADD: u8 = 0;
const BULK_BUNDLE: u32 = 0;
const ATOMIC_ORDERED: u16 = 3;

fn header(out: &mut Vec<u8>, msg_type: u8, length: usize) -> Result<()> {
    let length = u16::try_from(length).map_err(|_| Declined("a message over 64 KiB".into()))?;
    out.push(VERSION);
    out.push(msg_type);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    Ok(())
}

/// One flow, to add (`OFPFC_ADD`, xid 0), as a message of the bulk bundle
/// (`ofp.bundle_add(BULK_BUNDLE, ofp.flow_mod(...), 0)`), appended to `out`; `actions` are
/// its encoded actions (empty: drop). On `Declined`, `out` is as it was.
pub fn bundle_add_flow(
    out: &mut Vec<u8>,
    table: u8,
    priority: u16,
    cookie: u64,
    match_text: &str,
    actions: &[u8],
) -> Result<()> {
    let matched = encode_match(match_text)?;
    let instruction = if actions.is_empty() {
        0
    } else {
        8 + actions.len()
    };
    let flow_mod_len = 8 + 40 + matched.len() + instruction;
    let length = 16 + flow_mod_len;
    let pad = (8 - length % 8) % 8;
    let start = out.len();
    let framed = (|| {
        header(out, OFPT_BUNDLE_ADD_MESSAGE, length + pad)?;
        out.extend_from_slice(&BULK_BUNDLE.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&ATOMIC_ORDERED.to_be_bytes());
        header(out, OFPT_FLOW_MOD, flow_mod_len)?;
        out.extend_from_slice(&cookie.to_be_bytes());
        out.extend_from_slice(&0u64.to_be_bytes()); // cookie mask
        out.extend_from_slice(&[table, OFPFC_ADD]);
        out.extend_from_slice(&[0; 4]); // idle and hard timeouts
        out.extend_from_slice(&priority.to_be_bytes());
        out.extend_from_slice(&[0xFF; 12]); // no buffer, any out_port, any out_group
        out.extend_from_slice(&[0; 4]); // flags, importance
        out.extend_from_slice(&matched);
        if !actions.is_empty() {
            out.extend_from_slice(&4u16.to_be_bytes()); // OFPIT_APPLY_ACTIONS
            out.extend_from_slice(&((8 + actions.len()) as u16).to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(actions);
        }
        out.resize(out.len() + pad, 0);
        Ok(())
    })();
    if framed.is_err() {
        out.truncate(start);
    }
    framed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_match_is_its_fields_in_prerequisite_then_header_order() {
        let m = encode_match("metadata=0x5,reg14=0x1,ip,nw_src=10.0.0.0/8").unwrap();
        // length 4 + eth_type(6) + reg14(8) + metadata(12) + ip_src masked(12) = 42 -> 48
        assert_eq!(&m[..4], &[0, 1, 0, 42]);
        assert_eq!(m.len(), 48);
        assert_eq!(&m[4..10], &[0x80, 0x00, 0x0A, 0x02, 0x08, 0x00]); // eth_type first
        assert_eq!(&m[10..14], &[0x00, 0x01, 0x1C, 0x04]); // reg14 (NXM1) before OXM
        assert_eq!(&m[18..22], &[0x80, 0x00, 0x04, 0x08]); // metadata
        assert_eq!(&m[30..34], &[0x80, 0x00, 0x17, 0x08]); // ip_src, masked
        assert_eq!(&m[34..42], &[10, 0, 0, 0, 255, 0, 0, 0]);
    }

    #[test]
    fn what_it_does_not_know_is_declined() {
        for text in [
            "nxm_of_eth_src=00:00:00:00:00:01",
            "foo=1",
            "tcp,tp_src=08",
            "ct_state=+bogus",
            "reg16=1",
            "eth_type=0x10000",
            "dl_src=00:00:00:00:00",
            "tp_dst=80",
        ] {
            assert!(encode_match(text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_bundled_flow_is_framed_and_padded() {
        let mut out = vec![9];
        bundle_add_flow(
            &mut out,
            12,
            100,
            0xAB,
            "reg15=0x1",
            &[0, 0, 0, 16, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0],
        )
        .unwrap();
        let msg = &out[1..];
        assert_eq!(msg.len() % 8, 0);
        assert_eq!(u16::from_be_bytes([msg[2], msg[3]]) as usize, msg.len());
        assert_eq!(msg[1], OFPT_BUNDLE_ADD_MESSAGE);
        assert_eq!(msg[17], OFPT_FLOW_MOD);
        let before = out.len();
        assert!(bundle_add_flow(&mut out, 0, 0, 0, "bogus=1", &[]).is_err());
        assert_eq!(out.len(), before);
    }
}
