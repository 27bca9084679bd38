//! The wire format of host events (see the module doc of [`super`]): one stream entry's fields
//! `epoch`, `seq`, `kind`, `tier` and `hashes` (routing-chain block hashes in hex, comma
//! separated), and a stream reply parsed back into [`Entry`]s. Parsing takes anything a server
//! may send: a malformed entry is skipped and counted, never a panic, and every number is
//! checked.

use memoria_kv::BlockHash;
use redis::Value;

/// Most hashes one entry carries (a longer batch is split over several entries), and most a
/// reader accepts in one entry.
pub const MAX_ENTRY_HASHES: usize = 512;

/// What an event says about its hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The host now holds these blocks.
    Stored,
    /// The host no longer holds these blocks.
    Removed,
    /// The host holds nothing (a start, or a resynchronisation): forget its earlier events.
    Cleared,
}

impl Kind {
    /// The field value.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Stored => "stored",
            Kind::Removed => "removed",
            Kind::Cleared => "cleared",
        }
    }

    fn parse(s: &[u8]) -> Option<Kind> {
        match s {
            b"stored" => Some(Kind::Stored),
            b"removed" => Some(Kind::Removed),
            b"cleared" => Some(Kind::Cleared),
            _ => None,
        }
    }
}

/// Where the host holds the blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// The in-RAM block pool.
    Hot,
    /// The compressed RAM tier.
    Cold,
    /// The redb file.
    Disk,
}

impl Tier {
    /// Every tier, hottest first.
    pub const ALL: [Tier; 3] = [Tier::Hot, Tier::Cold, Tier::Disk];

    /// This tier's place in [`Tier::ALL`].
    pub fn index(self) -> usize {
        match self {
            Tier::Hot => 0,
            Tier::Cold => 1,
            Tier::Disk => 2,
        }
    }

    /// This tier's bit in a set of tiers held in a `u8`.
    pub fn bit(self) -> u8 {
        1 << self.index()
    }

    /// The field value.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Hot => "hot",
            Tier::Cold => "cold",
            Tier::Disk => "disk",
        }
    }

    fn parse(s: &[u8]) -> Option<Tier> {
        match s {
            b"hot" => Some(Tier::Hot),
            b"cold" => Some(Tier::Cold),
            b"disk" => Some(Tier::Disk),
            _ => None,
        }
    }
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The host's run (unix milliseconds at its start): a new epoch replaces the old one's state.
    pub epoch: u64,
    /// Position in the epoch, from 1.
    pub seq: u64,
    pub kind: Kind,
    pub tier: Tier,
    /// Routing-chain hashes (`memoria_kv::route_key`), empty for [`Kind::Cleared`].
    pub hashes: Vec<BlockHash>,
}

/// The field names of an entry, in order: nothing else is ever written.
pub const FIELDS: [&str; 5] = ["epoch", "seq", "kind", "tier", "hashes"];

impl Event {
    /// The entry's `(field, value)` pairs, as `XADD` takes them.
    pub fn fields(&self) -> [(&'static str, String); 5] {
        let mut hashes = String::with_capacity(self.hashes.len() * 65);
        for (i, h) in self.hashes.iter().enumerate() {
            if i > 0 {
                hashes.push(',');
            }
            hashes.push_str(&hex(h));
        }
        [
            ("epoch", self.epoch.to_string()),
            ("seq", self.seq.to_string()),
            ("kind", self.kind.as_str().to_string()),
            ("tier", self.tier.as_str().to_string()),
            ("hashes", hashes),
        ]
    }
}

/// 64 lowercase hex digits.
pub fn hex(h: &BlockHash) -> String {
    let mut s = String::with_capacity(64);
    for &b in &h.0 {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    s
}

/// Parses 64 hex digits (either case).
pub fn parse_hex(s: &[u8]) -> Option<BlockHash> {
    if s.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(BlockHash(out))
}

/// A decimal `u64` with nothing around it.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// An entry's field-value pairs as byte strings.
fn pairs(v: &Value) -> Option<Vec<(&[u8], &[u8])>> {
    fn bytes(v: &Value) -> Option<&[u8]> {
        match v {
            Value::BulkString(b) => Some(b.as_slice()),
            Value::SimpleString(s) => Some(s.as_bytes()),
            _ => None,
        }
    }
    match v {
        Value::Array(items) if items.len() % 2 == 0 => items
            .chunks_exact(2)
            .map(|p| Some((bytes(&p[0])?, bytes(&p[1])?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
            .collect(),
        _ => None,
    }
}

/// One entry's fields as an event, or None when any field is missing, repeated, unknown or
/// malformed.
pub fn parse_event(fields: &Value) -> Option<Event> {
    let mut got: [Option<&[u8]>; 5] = [None; 5];
    for (k, v) in pairs(fields)? {
        let i = FIELDS.iter().position(|f| f.as_bytes() == k)?;
        if got[i].replace(v).is_some() {
            return None;
        }
    }
    let [Some(epoch), Some(seq), Some(kind), Some(tier), Some(hashes)] = got else {
        return None;
    };
    let hashes: Vec<BlockHash> = if hashes.is_empty() {
        Vec::new()
    } else {
        let parts = hashes.split(|&c| c == b',');
        if parts.clone().count() > MAX_ENTRY_HASHES {
            return None;
        }
        parts.map(parse_hex).collect::<Option<_>>()?
    };
    let seq = parse_u64(seq).filter(|&s| s > 0)?;
    Some(Event {
        epoch: parse_u64(epoch)?,
        seq,
        kind: Kind::parse(kind)?,
        tier: Tier::parse(tier)?,
        hashes,
    })
}

/// A stream entry id, `MS-SEQ`, kept as text to resume from.
fn entry_id(v: &Value) -> Option<String> {
    let s = match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?,
        Value::SimpleString(s) => s.as_str(),
        _ => return None,
    };
    let (ms, seq) = s.split_once('-')?;
    (parse_u64(ms.as_bytes()).is_some() && parse_u64(seq.as_bytes()).is_some())
        .then(|| s.to_string())
}

/// One stream's entries from a reply: the id of the last well-formed entry id seen (to resume
/// from, even when its fields were bad), the events, and how many entries were skipped.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StreamRead {
    pub last_id: Option<String>,
    pub events: Vec<Event>,
    pub skipped: u64,
}

/// Parses the entries of one stream (`XRANGE`'s reply, or one stream's part of `XREAD`'s).
pub fn parse_entries(v: &Value) -> StreamRead {
    let mut out = StreamRead::default();
    let Value::Array(entries) = v else {
        if !matches!(v, Value::Nil) {
            out.skipped += 1;
        }
        return out;
    };
    for e in entries {
        let parsed = match e {
            Value::Array(pair) if pair.len() == 2 => {
                entry_id(&pair[0]).map(|id| (id, parse_event(&pair[1])))
            }
            _ => None,
        };
        match parsed {
            Some((id, ev)) => {
                out.last_id = Some(id);
                match ev {
                    Some(ev) => out.events.push(ev),
                    None => out.skipped += 1,
                }
            }
            None => out.skipped += 1,
        }
    }
    out
}

/// `XREAD`'s reply as `(stream key, entries)` pairs (RESP2 array or RESP3 map; Nil: none).
pub fn parse_xread(v: &Value) -> (Vec<(String, StreamRead)>, u64) {
    let key = |k: &Value| match k {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let mut skipped = 0;
    let parts: Vec<(&Value, &Value)> = match v {
        Value::Nil => Vec::new(),
        Value::Array(streams) => streams
            .iter()
            .filter_map(|s| match s {
                Value::Array(pair) if pair.len() == 2 => Some((&pair[0], &pair[1])),
                _ => {
                    skipped += 1;
                    None
                }
            })
            .collect(),
        Value::Map(streams) => streams.iter().map(|(k, e)| (k, e)).collect(),
        _ => {
            skipped += 1;
            Vec::new()
        }
    };
    let mut out = Vec::new();
    for (k, entries) in parts {
        match key(k) {
            Some(k) => out.push((k, parse_entries(entries))),
            None => skipped += 1,
        }
    }
    (out, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(id: &str, fields: &[(&str, &str)]) -> Value {
        let f = fields
            .iter()
            .flat_map(|(k, v)| [bulk(k), bulk(v)])
            .collect();
        Value::Array(vec![bulk(id), Value::Array(f)])
    }

    fn event() -> Event {
        Event {
            epoch: 1_700_000_000_000,
            seq: 3,
            kind: Kind::Stored,
            tier: Tier::Hot,
            hashes: vec![BlockHash([0xab; 32]), BlockHash([1; 32])],
        }
    }

    #[test]
    fn an_event_round_trips_through_its_fields() {
        let e = event();
        let f = e.fields();
        assert_eq!(f.iter().map(|(k, _)| *k).collect::<Vec<_>>(), FIELDS);
        let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let read = parse_entries(&Value::Array(vec![entry("5-0", &pairs)]));
        assert_eq!(read.events, vec![e]);
        assert_eq!((read.last_id.as_deref(), read.skipped), (Some("5-0"), 0));
        let cleared = Event {
            kind: Kind::Cleared,
            hashes: vec![],
            ..event()
        };
        let f = cleared.fields();
        let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(
            parse_entries(&Value::Array(vec![entry("6-1", &pairs)])).events,
            vec![cleared]
        );
        assert_eq!(
            parse_hex(hex(&BlockHash([7; 32])).as_bytes()),
            Some(BlockHash([7; 32]))
        );
    }

    #[test]
    fn garbage_entries_are_skipped_and_counted() {
        let good = event().fields();
        let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut bad_sets: Vec<Vec<(&str, &str)>> = Vec::new();
        for (field, value) in [
            ("epoch", "-1"),
            ("epoch", "99999999999999999999999"),
            ("seq", "0"),
            ("seq", " 1"),
            ("kind", "moved"),
            ("tier", "tape"),
            ("hashes", "abc"),
            ("hashes", "zz"),
        ] {
            let mut s = good.clone();
            for p in &mut s {
                if p.0 == field {
                    p.1 = value;
                }
            }
            bad_sets.push(s);
        }
        let mut extra = good.clone();
        extra.push(("tokens", "1,2,3"));
        bad_sets.push(extra);
        let mut twice = good.clone();
        twice.push(("seq", "4"));
        bad_sets.push(twice);
        bad_sets.push(good[1..].to_vec());
        let mut entries: Vec<Value> = bad_sets.iter().map(|s| entry("1-0", s)).collect();
        entries.push(Value::Int(3));
        entries.push(Value::Array(vec![bulk("nope"), Value::Array(vec![])]));
        entries.push(Value::Array(vec![
            bulk("2-0"),
            Value::Array(vec![bulk("odd")]),
        ]));
        entries.push(entry("9-9", &good));
        let n = entries.len() as u64;
        let read = parse_entries(&Value::Array(entries));
        assert_eq!(read.events, vec![event()]);
        assert_eq!(read.skipped, n - 1);
        assert_eq!(read.last_id.as_deref(), Some("9-9"));
        let too_many = vec![hex(&BlockHash([0; 32])); MAX_ENTRY_HASHES + 1].join(",");
        let mut s = good.clone();
        s[4].1 = &too_many;
        assert_eq!(
            parse_entries(&Value::Array(vec![entry("1-1", &s)])).skipped,
            1
        );
        assert_eq!(parse_entries(&Value::Okay).skipped, 1);
        assert_eq!(parse_entries(&Value::Nil), StreamRead::default());
    }

    #[test]
    fn xread_replies_in_either_protocol() {
        let good = event().fields();
        let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let entries = Value::Array(vec![entry("1-0", &good)]);
        let resp2 = Value::Array(vec![
            Value::Array(vec![bulk("m:events:a"), entries.clone()]),
            Value::Int(1),
        ]);
        let (streams, skipped) = parse_xread(&resp2);
        assert_eq!((streams.len(), skipped), (1, 1));
        assert_eq!(streams[0].0, "m:events:a");
        assert_eq!(streams[0].1.events.len(), 1);
        let resp3 = Value::Map(vec![(bulk("m:events:b"), entries)]);
        assert_eq!(parse_xread(&resp3).0[0].0, "m:events:b");
        assert_eq!(parse_xread(&Value::Nil), (vec![], 0));
        assert_eq!(parse_xread(&Value::Int(0)).1, 1);
    }
}
