//! `OpenFlow` 1.5 encoding of the flows Loom pushes: the bytes a physical controller sends
//! a node, for whole tables and for changes.
//!
//! A cold start at NVP's scale encodes every universal flow (1.45M in each physical
//! controller), and its matches nearly never repeat (each names its datapath and a port's
//! addresses); in Python that was a cost per flow paid over a million times, a large share
//! of a controller's cold start.
//! This crate encodes `ovs-ofctl` matches ([`encode_match`]) and action lists
//! ([`encode_actions`]), whole `FLOW_MOD`s ([`flow_mod`]) and bulk-bundle messages
//! ([`bundle_add_flow`]); [`standin`] reads such bundles back, for the benchmark's
//! stand-in nodes. The Python encoder (`loom_ovs.ofp`) is the reference: whatever
//! this crate encodes is the same bytes as Python's (tested on every golden flow and on
//! generated matches and action lists), and what it does not know it declines
//! ([`Declined`]) for Python to encode or refuse.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

pub mod standin;

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

/// One OXM/NXM field: class, code, width in bytes, value syntax, the `NXM_*`/`OXM_*`
/// name actions use for it (`move`, `ct`'s zone), and the width a reference to it carries
/// (`tun_metadata0`'s is variable: 124).
#[derive(Clone, Copy)]
struct Field {
    name: &'static str,
    class: u16,
    code: u8,
    nbytes: usize,
    kind: Kind,
    nx_name: &'static str,
    ref_bytes: usize,
}

impl Field {
    fn header(&self, masked: bool, nbytes: usize) -> u32 {
        let len = nbytes * if masked { 2 } else { 1 };
        u32::from(self.class) << 16
            | u32::from(self.code) << 9
            | u32::from(masked) << 8
            | len as u32
    }

    /// The header naming the field in an action (`ofp.Field.ref_header`).
    fn ref_header(&self) -> u32 {
        self.header(false, self.ref_bytes)
    }

    fn bits(&self) -> usize {
        self.nbytes * 8
    }
}

const OXM: u16 = 0x8000;
const NXM0: u16 = 0x0000;
const NXM1: u16 = 0x0001;
const PKT_REG: u16 = 0x8001;
const ERIC: u16 = 0x1000;

const fn f(
    name: &'static str,
    class: u16,
    code: u8,
    nbytes: usize,
    kind: Kind,
    nx_name: &'static str,
) -> Field {
    Field {
        name,
        class,
        code,
        nbytes,
        kind,
        nx_name,
        ref_bytes: nbytes,
    }
}

/// The fields by their canonical name (`loom_ovs.ofp._fields`; registers apart).
const FIELDS: &[Field] = &[
    f("in_port", OXM, 0, 4, Kind::Int, "OXM_OF_IN_PORT"),
    f("metadata", OXM, 2, 8, Kind::Int, "OXM_OF_METADATA"),
    f("eth_dst", OXM, 3, 6, Kind::Mac, "NXM_OF_ETH_DST"),
    f("eth_src", OXM, 4, 6, Kind::Mac, "NXM_OF_ETH_SRC"),
    f("eth_type", OXM, 5, 2, Kind::Int, "NXM_OF_ETH_TYPE"),
    f("vlan_vid", OXM, 6, 2, Kind::Int, "OXM_OF_VLAN_VID"),
    f("vlan_pcp", OXM, 7, 1, Kind::Int, "OXM_OF_VLAN_PCP"),
    f("ip_dscp", OXM, 8, 1, Kind::Int, "OXM_OF_IP_DSCP"),
    f("ip_proto", OXM, 10, 1, Kind::Int, "NXM_OF_IP_PROTO"),
    f("ip_src", OXM, 11, 4, Kind::Ipv4, "NXM_OF_IP_SRC"),
    f("ip_dst", OXM, 12, 4, Kind::Ipv4, "NXM_OF_IP_DST"),
    f("tcp_src", OXM, 13, 2, Kind::Int, "NXM_OF_TCP_SRC"),
    f("tcp_dst", OXM, 14, 2, Kind::Int, "NXM_OF_TCP_DST"),
    f("udp_src", OXM, 15, 2, Kind::Int, "NXM_OF_UDP_SRC"),
    f("udp_dst", OXM, 16, 2, Kind::Int, "NXM_OF_UDP_DST"),
    f("sctp_src", OXM, 17, 2, Kind::Int, "OXM_OF_SCTP_SRC"),
    f("sctp_dst", OXM, 18, 2, Kind::Int, "OXM_OF_SCTP_DST"),
    f("icmp_type", OXM, 19, 1, Kind::Int, "NXM_OF_ICMP_TYPE"),
    f("icmp_code", OXM, 20, 1, Kind::Int, "NXM_OF_ICMP_CODE"),
    f("arp_op", OXM, 21, 2, Kind::Int, "NXM_OF_ARP_OP"),
    f("arp_spa", OXM, 22, 4, Kind::Ipv4, "NXM_OF_ARP_SPA"),
    f("arp_tpa", OXM, 23, 4, Kind::Ipv4, "NXM_OF_ARP_TPA"),
    f("arp_sha", OXM, 24, 6, Kind::Mac, "NXM_NX_ARP_SHA"),
    f("arp_tha", OXM, 25, 6, Kind::Mac, "NXM_NX_ARP_THA"),
    f("ipv6_src", OXM, 26, 16, Kind::Ipv6, "NXM_NX_IPV6_SRC"),
    f("ipv6_dst", OXM, 27, 16, Kind::Ipv6, "NXM_NX_IPV6_DST"),
    f("icmpv6_type", OXM, 29, 1, Kind::Int, "NXM_NX_ICMPV6_TYPE"),
    f("icmpv6_code", OXM, 30, 1, Kind::Int, "NXM_NX_ICMPV6_CODE"),
    f("nd_target", OXM, 31, 16, Kind::Ipv6, "NXM_NX_ND_TARGET"),
    f("nd_sll", OXM, 32, 6, Kind::Mac, "NXM_NX_ND_SLL"),
    f("nd_tll", OXM, 33, 6, Kind::Mac, "NXM_NX_ND_TLL"),
    f("tun_id", OXM, 38, 8, Kind::Int, "NXM_NX_TUN_ID"),
    f("tun_src", NXM1, 31, 4, Kind::Ipv4, "NXM_NX_TUN_IPV4_SRC"),
    f("tun_dst", NXM1, 32, 4, Kind::Ipv4, "NXM_NX_TUN_IPV4_DST"),
    f(
        "tun_ipv6_src",
        NXM1,
        109,
        16,
        Kind::Ipv6,
        "NXM_NX_TUN_IPV6_SRC",
    ),
    f(
        "tun_ipv6_dst",
        NXM1,
        110,
        16,
        Kind::Ipv6,
        "NXM_NX_TUN_IPV6_DST",
    ),
    f("vlan_tci", NXM0, 4, 2, Kind::Int, "NXM_OF_VLAN_TCI"),
    f("nw_ttl", NXM1, 29, 1, Kind::Int, "NXM_NX_IP_TTL"),
    f("conj_id", NXM1, 37, 4, Kind::Int, "NXM_NX_CONJ_ID"),
    f("pkt_mark", NXM1, 33, 4, Kind::Int, "NXM_NX_PKT_MARK"),
    Field {
        ref_bytes: 124,
        ..f(
            "tun_metadata0",
            NXM1,
            40,
            4,
            Kind::Int,
            "NXM_NX_TUN_METADATA0",
        )
    },
    f("ct_state", NXM1, 105, 4, Kind::CtState, "NXM_NX_CT_STATE"),
    f("ct_zone", NXM1, 106, 2, Kind::Int, "NXM_NX_CT_ZONE"),
    f("ct_mark", NXM1, 107, 4, Kind::Int, "NXM_NX_CT_MARK"),
    f(
        "nd_reserved",
        ERIC,
        1,
        4,
        Kind::Int,
        "ERICOXM_OF_ICMPV6_ND_RESERVED",
    ),
    f(
        "nd_options_type",
        ERIC,
        2,
        1,
        Kind::Int,
        "ERICOXM_OF_ICMPV6_ND_OPTIONS_TYPE",
    ),
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
        nx_name: "",
        ref_bytes: nbytes,
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
    let mut out = field
        .header(mask.is_some(), raw.len())
        .to_be_bytes()
        .to_vec();
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

// ---- actions ----

const NX_VENDOR: u32 = 0x0000_2320;
const NXM_OF_IN_PORT: u32 = 0x0000_0002;
const OFPP_CONTROLLER: u32 = 0xFFFF_FFFD;

/// A field by any name an action may use: canonical, alias, register, `NXM_*`/`OXM_*`
/// (lower case; `ofp.FIELDS`).
fn any_field(lower: &str) -> Option<Field> {
    if let Some(found) = field(lower) {
        return Some(found);
    }
    if let Some(found) = FIELDS
        .iter()
        .find(|f| f.nx_name.eq_ignore_ascii_case(lower))
    {
        return Some(*found);
    }
    let (prefix, short) = [
        ("nxm_nx_xxreg", "xxreg"),
        ("oxm_of_pkt_reg", "xreg"),
        ("nxm_nx_reg", "reg"),
    ]
    .into_iter()
    .find(|(p, _)| lower.starts_with(p))?;
    register(&format!("{short}{}", &lower[prefix.len()..]))
}

/// A Nicira vendor action: header, subtype, `body`, padded to 8 bytes (`ofp._nx`).
fn nx(subtype: u16, body: &[u8]) -> Vec<u8> {
    let length = 10 + body.len();
    let pad = (8 - length % 8) % 8;
    let mut out = Vec::with_capacity(length + pad);
    out.extend_from_slice(&0xFFFFu16.to_be_bytes());
    out.extend_from_slice(&((length + pad) as u16).to_be_bytes());
    out.extend_from_slice(&NX_VENDOR.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
    out.extend_from_slice(body);
    out.resize(length + pad, 0);
    out
}

/// Split on commas outside parentheses, each piece trimmed, empty ones dropped
/// (`ofp._split`).
fn split(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                let piece = text[start..i].trim();
                if !piece.is_empty() {
                    parts.push(piece);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    let tail = text[start..].trim();
    if !tail.is_empty() {
        parts.push(tail);
    }
    parts
}

/// `NAME[]`, `NAME[BIT]` or `NAME[START..END]` -> (field, offset, bits) (`ofp._subfield`).
fn subfield(text: &str) -> Result<(Field, usize, usize)> {
    let declined = || Declined(format!("{text:?} is not a field reference"));
    let t = text.trim();
    let (name, rest) = t.split_once('[').ok_or_else(declined)?;
    let range = rest.strip_suffix(']').ok_or_else(declined)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(declined());
    }
    let found = any_field(&name.to_ascii_lowercase()).ok_or_else(declined)?;
    if range.is_empty() {
        return Ok((found, 0, found.bits()));
    }
    let digits = |d: &str| -> Result<usize> {
        if d.is_empty() || !d.chars().all(|c| c.is_ascii_digit()) {
            return Err(declined());
        }
        d.parse().map_err(|_| declined())
    };
    let (start, end) = if let Some((a, b)) = range.split_once("..") {
        (digits(a)?, digits(b)?)
    } else {
        let bit = digits(range)?;
        (bit, bit)
    };
    if end < start || end >= found.bits() {
        return Err(declined());
    }
    Ok((found, start, end - start + 1))
}

/// A port number or name (`ofp._port`).
fn port(text: &str) -> Result<u32> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if let Some((_, p)) = PORTS.iter().find(|(n, _)| *n == lower) {
        return Ok(*p);
    }
    let number = u32::try_from(int(t)?).map_err(|_| Declined(format!("port {t:?}")))?;
    // OpenFlow 1.0 style reserved numbers (0xff00..) as OVS accepts them
    Ok(if (0xFF00..=0xFFFF).contains(&number) {
        number + 0xFFFF_0000
    } else {
        number
    })
}

fn output(p: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&[0, 0, 0, 16]);
    out.extend_from_slice(&p.to_be_bytes());
    out.extend_from_slice(&(if p == OFPP_CONTROLLER { 0xFFE5u16 } else { 0 }).to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    out
}

/// The 16-bit `NXM_OF_IN_PORT` a `set_field` writes (OVS refuses `OXM_OF_IN_PORT` there).
const NX_IN_PORT: Field = f("in_port", NXM0, 0, 2, Kind::Int, "NXM_OF_IN_PORT");

fn set_field(text: &str) -> Result<Vec<u8>> {
    let (value_text, target) = text
        .rsplit_once("->")
        .ok_or_else(|| Declined(format!("set_field:{text}")))?;
    let name = target.trim().to_ascii_lowercase();
    let target_field = if name == "in_port" {
        NX_IN_PORT
    } else {
        any_field(&name).ok_or_else(|| Declined(format!("set_field to {target:?}")))?
    };
    let (raw, mask) = value_mask(&target_field, value_text.trim())?;
    let entry = oxm(&target_field, &raw, mask.as_deref());
    let length = 4 + entry.len();
    let pad = (8 - length % 8) % 8;
    let mut out = Vec::with_capacity(length + pad);
    out.extend_from_slice(&25u16.to_be_bytes());
    out.extend_from_slice(&((length + pad) as u16).to_be_bytes());
    out.extend_from_slice(&entry);
    out.resize(length + pad, 0);
    Ok(out)
}

fn move_field(text: &str) -> Result<Vec<u8>> {
    let (src_text, dst_text) = text
        .split_once("->")
        .ok_or_else(|| Declined(format!("move:{text}")))?;
    let (src, src_ofs, src_bits) = subfield(src_text)?;
    let (dst, dst_ofs, dst_bits) = subfield(dst_text)?;
    if src_bits != dst_bits {
        return Err(Declined(format!(
            "move:{text}: {src_bits} bits to {dst_bits}"
        )));
    }
    // OFPAT_COPY_FIELD: OVS takes NXAST_REG_MOVE in OpenFlow 1.0-1.4 only
    let mut out = Vec::with_capacity(24);
    for half in [
        28u16,
        24,
        src_bits as u16,
        src_ofs as u16,
        dst_ofs as u16,
        0,
    ] {
        out.extend_from_slice(&half.to_be_bytes());
    }
    out.extend_from_slice(&src.ref_header().to_be_bytes());
    out.extend_from_slice(&dst.ref_header().to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    Ok(out)
}

fn small<T: TryFrom<u128>>(value: u128, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| Declined(format!("{what}: {value} is out of range")))
}

fn resubmit(args: &str) -> Result<Vec<u8>> {
    let (port_text, table_text) = args.split_once(',').unwrap_or((args, ""));
    let p = if port_text.trim().is_empty() {
        0xFFF8
    } else {
        port(port_text)? & 0xFFFF
    };
    let table: u8 = if table_text.trim().is_empty() {
        0xFF
    } else {
        small(int(table_text)?, "table")?
    };
    let mut body = (p as u16).to_be_bytes().to_vec();
    body.extend_from_slice(&[table, 0, 0, 0]);
    Ok(nx(14, &body))
}

fn ct(args: &str) -> Result<Vec<u8>> {
    let (mut flags, mut zone_src, mut zone, mut table, mut alg) = (0u16, 0u32, 0u16, 0xFFu8, 0u16);
    let mut nested = Vec::new();
    for part in split(args) {
        let (key, value) = part
            .split_once('=')
            .map_or((part, None), |(k, v)| (k, Some(v)));
        match (key, value) {
            ("commit", None) => flags |= 1,
            ("force", None) => flags |= 3,
            ("zone", Some(v)) if v.contains('[') => {
                let (found, ofs, bits) = subfield(v)?;
                zone_src = found.ref_header();
                zone = (ofs << 6 | (bits - 1)) as u16;
            }
            ("zone", Some(v)) => zone = small(int(v)?, "zone")?,
            ("table", Some(v)) => table = small(int(v)?, "table")?,
            ("alg", Some("ftp")) => alg = 21,
            ("alg", Some("tftp")) => alg = 69,
            ("alg", Some(v)) => alg = small(int(v)?, "alg")?,
            _ if part == "nat" => nested.extend(nat("")?),
            _ if part.starts_with("nat(") && part.ends_with(')') => {
                nested.extend(nat(&part[4..part.len() - 1])?);
            }
            _ if part.starts_with("exec(") && part.ends_with(')') => {
                nested.extend(encode_actions(&part[5..part.len() - 1])?);
            }
            _ => return Err(Declined(format!("ct: argument {part:?}"))),
        }
    }
    let mut head = Vec::with_capacity(14);
    head.extend_from_slice(&flags.to_be_bytes());
    head.extend_from_slice(&zone_src.to_be_bytes());
    head.extend_from_slice(&zone.to_be_bytes());
    head.extend_from_slice(&[table, 0, 0, 0]);
    head.extend_from_slice(&alg.to_be_bytes());
    head.extend(nested);
    Ok(nx(35, &head))
}

fn nat(args: &str) -> Result<Vec<u8>> {
    let (mut flags, mut present) = (0u16, 0u16);
    // ipv4 min, max; ipv6 min, max; port min, max
    let mut ranges: [Vec<u8>; 6] = Default::default();
    for part in split(args) {
        let declined = || Declined(format!("nat: {part:?}"));
        match part.split_once('=') {
            Some((key @ ("src" | "dst"), value)) => {
                flags |= if key == "src" { 1 } else { 2 };
                let (addrs, ports) = if let Some(rest) = value.strip_prefix('[') {
                    let (inside, after) = rest.split_once(']').ok_or_else(declined)?;
                    match after {
                        "" => (inside, None),
                        _ => (inside, Some(after.strip_prefix(':').ok_or_else(declined)?)),
                    }
                } else {
                    value
                        .split_once(':')
                        .map_or((value, None), |(a, p)| (a, Some(p)))
                };
                let packed: Vec<Vec<u8>> = addrs
                    .splitn(2, '-')
                    .map(|a| {
                        a.parse::<std::net::IpAddr>()
                            .map_err(|_| declined())
                            .map(|ip| match ip {
                                std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
                                std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
                            })
                    })
                    .collect::<Result<_>>()?;
                let at = if packed[0].len() == 4 { 0 } else { 2 };
                if packed.len() > 1 && packed[1].len() != packed[0].len() {
                    return Err(declined());
                }
                ranges[at].clone_from(&packed[0]);
                ranges[at + 1] = packed.get(1).cloned().unwrap_or_default();
                if let Some(ports) = ports.filter(|p| !p.is_empty()) {
                    let (low, high) = ports.split_once('-').unwrap_or((ports, ""));
                    let number = |t: &str| -> Result<Vec<u8>> {
                        let t = t.trim();
                        if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit()) {
                            return Err(declined());
                        }
                        let n: u16 = t.parse().map_err(|_| declined())?;
                        Ok(n.to_be_bytes().to_vec())
                    };
                    ranges[4] = number(low)?;
                    ranges[5] = if high.is_empty() {
                        Vec::new()
                    } else {
                        number(high)?
                    };
                }
            }
            None if part == "persistent" => flags |= 4,
            None if part == "hash" => flags |= 8,
            None if part == "random" => flags |= 16,
            _ => return Err(declined()),
        }
    }
    let mut body = vec![0, 0];
    let mut values = Vec::new();
    for (bit, range) in ranges.iter().enumerate() {
        if !range.is_empty() {
            present |= 1 << bit;
            values.extend_from_slice(range);
        }
    }
    body.extend_from_slice(&flags.to_be_bytes());
    body.extend_from_slice(&present.to_be_bytes());
    body.extend(values);
    Ok(nx(36, &body))
}

fn bundle(args: &str) -> Result<Vec<u8>> {
    let declined = || Declined(format!("bundle({args})"));
    let parts: Vec<&str> = args.splitn(5, ',').map(str::trim).collect();
    if parts.len() != 5 || parts[3] != "ofport" {
        return Err(declined());
    }
    let members_text = parts[4].strip_prefix("members:").ok_or_else(declined)?;
    let fields = match parts[0] {
        "eth_src" => 0u16,
        "symmetric_l4" => 1,
        "symmetric_l3l4" => 2,
        "symmetric_l3l4+udp" => 3,
        "nw_src" => 4,
        "nw_dst" => 5,
        "symmetric_l3" => 6,
        _ => return Err(declined()),
    };
    let algorithm = match parts[2] {
        "active_backup" => 0u16,
        "hrw" => 1,
        _ => return Err(declined()),
    };
    let basis: u16 = small(int(parts[1])?, "basis")?;
    let members: Vec<u32> = members_text
        .split(',')
        .filter(|m| !m.trim().is_empty())
        .map(port)
        .collect::<Result<_>>()?;
    let mut body = Vec::new();
    body.extend_from_slice(&algorithm.to_be_bytes());
    body.extend_from_slice(&fields.to_be_bytes());
    body.extend_from_slice(&basis.to_be_bytes());
    body.extend_from_slice(&NXM_OF_IN_PORT.to_be_bytes());
    body.extend_from_slice(&small::<u16>(members.len() as u128, "members")?.to_be_bytes());
    body.extend_from_slice(&[0; 10]); // ofs_nbits, dst, zero[4]
    for m in members {
        body.extend_from_slice(&((m & 0xFFFF) as u16).to_be_bytes());
    }
    Ok(nx(12, &body))
}

fn conjunction(args: &str) -> Result<Vec<u8>> {
    let declined = || Declined(format!("conjunction({args})"));
    let (id, rest) = args.split_once(',').ok_or_else(declined)?;
    let (clause, clauses) = rest.split_once('/').ok_or_else(declined)?;
    let number = |t: &str| -> Result<u128> {
        let t = t.trim();
        if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit()) {
            return Err(declined());
        }
        t.parse().map_err(|_| declined())
    };
    let (id, clause, clauses) = (number(id)?, number(clause)?, number(clauses)?);
    if clause == 0 {
        return Err(declined());
    }
    let mut body = vec![
        small::<u8>(clause - 1, "clause")?,
        small::<u8>(clauses, "clauses")?,
    ];
    body.extend_from_slice(&small::<u32>(id, "id")?.to_be_bytes());
    Ok(nx(34, &body))
}

/// One action (`ofp._action`).
fn action(part: &str) -> Result<Vec<u8>> {
    if let Some(open) = part.find('(') {
        let name = &part[..open];
        if part.ends_with(')')
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        {
            let args = &part[open + 1..part.len() - 1];
            match name {
                "resubmit" => return resubmit(args),
                "clone" => {
                    let mut body = vec![0; 6];
                    body.extend(encode_actions(args)?);
                    return Ok(nx(42, &body));
                }
                "ct" => return ct(args),
                "bundle" => return bundle(args),
                "conjunction" => return conjunction(args),
                "output" => return Ok(output(port(args)?)),
                _ => {}
            }
        }
    }
    if let Some((name, rest)) = part.split_once(':') {
        match name {
            "output" => return Ok(output(port(rest)?)),
            "set_field" => return set_field(rest),
            "move" => return move_field(rest),
            "push_vlan" => {
                let ethertype: u16 = small(int(rest)?, "push_vlan")?;
                let mut out = vec![0, 17, 0, 8];
                out.extend_from_slice(&ethertype.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                return Ok(out);
            }
            _ => {}
        }
    }
    match part {
        "pop_vlan" | "strip_vlan" => Ok(vec![0, 18, 0, 8, 0, 0, 0, 0]),
        "dec_ttl" => Ok(vec![0, 24, 0, 8, 0, 0, 0, 0]), // OFPAT_DEC_NW_TTL
        "ct_clear" => Ok(nx(43, &[0; 6])),
        "drop" => Ok(Vec::new()),
        _ if !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()) => {
            Ok(output(small(int(part)?, "port")?))
        }
        _ => Err(Declined(format!("action {part:?}"))),
    }
}

/// `OpenFlow` actions (OF1.5 and Nicira extensions) for an `ovs-ofctl` action list
/// (`ofp.encode_actions`).
pub fn encode_actions(text: &str) -> Result<Vec<u8>> {
    if !text.contains('(') && text.contains(',') && text.split(',').any(|p| p == "drop") {
        // (the reference refuses `drop,` whose other actions are only blanks)
        return Err(Declined("drop must be the only action".into()));
    }
    let parts = split(text);
    if parts.len() > 1 && parts.contains(&"drop") {
        return Err(Declined("drop must be the only action".into()));
    }
    let mut out = Vec::new();
    for part in parts {
        out.extend(action(part)?);
    }
    Ok(out)
}

const VERSION: u8 = 0x06;
const OFPT_FLOW_MOD: u8 = 14;
const OFPT_BUNDLE_ADD_MESSAGE: u8 = 34;
/// `OFPFC_ADD`: the command of a whole table's flows.
pub const OFPFC_ADD: u8 = 0;
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

/// An `OFPT_FLOW_MOD` with xid 0 (`ofp.flow_mod`): `command` (`OFPFC_*`), the flow's key
/// and cookie, and its encoded `actions` (empty: none, as a drop or a delete has).
pub fn flow_mod(
    command: u8,
    table: u8,
    priority: u16,
    cookie: u64,
    match_text: &str,
    actions: &[u8],
) -> Result<Vec<u8>> {
    let matched = encode_match(match_text)?;
    let instruction = if actions.is_empty() {
        0
    } else {
        8 + actions.len()
    };
    let length = 8 + 40 + matched.len() + instruction;
    let mut out = Vec::with_capacity(length);
    header(&mut out, OFPT_FLOW_MOD, length)?;
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes()); // cookie mask
    out.extend_from_slice(&[table, command]);
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
    Ok(out)
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
    let message = flow_mod(OFPFC_ADD, table, priority, cookie, match_text, actions)?;
    let length = 16 + message.len();
    let pad = (8 - length % 8) % 8;
    header(out, OFPT_BUNDLE_ADD_MESSAGE, length + pad)?;
    out.extend_from_slice(&BULK_BUNDLE.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&ATOMIC_ORDERED.to_be_bytes());
    out.extend_from_slice(&message);
    out.resize(out.len() + pad, 0);
    Ok(())
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
