//! The session-state block of an OK packet (CLIENT_SESSION_TRACK): parsing
//! into typed changes, and filtering down to what a client's own tracker
//! settings would have reported.

use bytes::{BufMut, BytesMut};

use super::lenenc::{Reader, put_lenenc_bytes};

/// `SESSION_TRACK_SYSTEM_VARIABLES`.
pub const TRACK_SYSTEM_VARIABLES: u8 = 0;
/// `SESSION_TRACK_SCHEMA`.
pub const TRACK_SCHEMA: u8 = 1;
/// `SESSION_TRACK_STATE_CHANGE`.
pub const TRACK_STATE_CHANGE: u8 = 2;
/// `SESSION_TRACK_GTIDS`.
pub const TRACK_GTIDS: u8 = 3;
/// `SESSION_TRACK_TRANSACTION_CHARACTERISTICS`.
pub const TRACK_TRANSACTION_CHARACTERISTICS: u8 = 4;
/// `SESSION_TRACK_TRANSACTION_STATE`.
pub const TRACK_TRANSACTION_STATE: u8 = 5;

/// One entry of the session-state block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Tracker type byte.
    pub kind: u8,
    /// The entry's data (without its own length prefix).
    pub data: &'a [u8],
}

/// A decoded change the proxy cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// A session system variable changed to this value.
    SystemVariable { name: &'a [u8], value: &'a [u8] },
    /// The default schema changed.
    Schema(&'a [u8]),
    /// Some session state changed (the tracker gives no detail).
    StateChanged,
    /// Anything else (GTIDs, transaction info).
    Other,
}

impl<'a> Entry<'a> {
    /// Decodes the entry.
    pub fn change(&self) -> Option<Change<'a>> {
        let mut r = Reader::new(self.data);
        Some(match self.kind {
            TRACK_SYSTEM_VARIABLES => Change::SystemVariable {
                name: r.lenenc_bytes()?,
                value: r.lenenc_bytes()?,
            },
            TRACK_SCHEMA => Change::Schema(r.lenenc_bytes()?),
            TRACK_STATE_CHANGE => Change::StateChanged,
            _ => Change::Other,
        })
    }
}

/// Appends one entry (`kind`, then `data` as a length-encoded string) to a
/// session-state block.
pub fn put_entry(out: &mut BytesMut, kind: u8, data: &[u8]) {
    out.put_u8(kind);
    put_lenenc_bytes(out, data);
}

/// Iterates the entries of a session-state block; stops at malformed input.
pub fn entries(block: &[u8]) -> impl Iterator<Item = Entry<'_>> {
    let mut r = Reader::new(block);
    std::iter::from_fn(move || {
        let kind = r.u8()?;
        let data = r.lenenc_bytes()?;
        Some(Entry { kind, data })
    })
}

/// What a client's own session trackers would report (its `session_track_*`
/// settings, from the server's global defaults).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTrackers {
    /// `session_track_schema`.
    pub schema: bool,
    /// `session_track_state_change`.
    pub state_change: bool,
    /// `session_track_system_variables`: `None` = `*`, else the names listed.
    pub system_variables: Option<Vec<String>>,
    /// `session_track_transaction_info` is not OFF.
    pub transaction_info: bool,
}

impl ClientTrackers {
    /// From the four `session_track_*` values as the server reports them.
    pub fn from_values(
        schema: &str,
        state_change: &str,
        system_variables: &str,
        txn: &str,
    ) -> Self {
        let mut t = Self::default();
        for (name, value) in [
            ("session_track_schema", schema),
            ("session_track_state_change", state_change),
            ("session_track_system_variables", system_variables),
            ("session_track_transaction_info", txn),
        ] {
            t.set(name, value);
        }
        t
    }

    /// Applies a new value of tracker variable `name` (as the server's
    /// tracker reports it); other names are ignored.
    pub fn set(&mut self, name: &str, value: &str) {
        let on = value == "1" || value.eq_ignore_ascii_case("on");
        match name {
            "session_track_schema" => self.schema = on,
            "session_track_state_change" => self.state_change = on,
            "session_track_system_variables" => {
                self.system_variables = if value.trim() == "*" {
                    None
                } else {
                    Some(
                        value
                            .split(',')
                            .map(|s| s.trim().to_ascii_lowercase())
                            .filter(|s| !s.is_empty())
                            .collect(),
                    )
                }
            }
            "session_track_transaction_info" => {
                self.transaction_info = !value.eq_ignore_ascii_case("off") && value != "0"
            }
            _ => {}
        }
    }

    /// These settings after the tracker-variable changes `block` reports;
    /// `None` when it reports none.
    fn after(&self, block: &[u8]) -> Option<Self> {
        let mut out: Option<Self> = None;
        for e in entries(block) {
            if let Some(Change::SystemVariable { name, value }) = e.change()
                && name.len() > 14
                && name[..14].eq_ignore_ascii_case(b"session_track_")
            {
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                out.get_or_insert_with(|| self.clone())
                    .set(&name, &String::from_utf8_lossy(value));
            }
        }
        out
    }

    fn keeps(&self, e: &Entry<'_>) -> bool {
        match e.kind {
            TRACK_SCHEMA => self.schema,
            TRACK_STATE_CHANGE => self.state_change,
            TRACK_SYSTEM_VARIABLES => match (&self.system_variables, e.change()) {
                (None, _) => true,
                (Some(list), Some(Change::SystemVariable { name, .. })) => {
                    list.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name))
                }
                _ => false,
            },
            TRACK_TRANSACTION_CHARACTERISTICS | TRACK_TRANSACTION_STATE => self.transaction_info,
            _ => true,
        }
    }

    /// Filters `block` to the entries this client would have seen. Returns
    /// `None` when nothing was removed (the block can be forwarded as is).
    /// A block that changes the trackers themselves is filtered with the new
    /// settings, as the server reports the statement that changed them.
    pub fn filter(&self, block: &[u8]) -> Option<BytesMut> {
        let changed = self.after(block);
        let t = changed.as_ref().unwrap_or(self);
        if entries(block).all(|e| t.keeps(&e)) {
            return None;
        }
        let mut out = BytesMut::new();
        for e in entries(block).filter(|e| t.keeps(e)) {
            put_entry(&mut out, e.kind, e.data);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(items: &[(u8, &[u8])]) -> BytesMut {
        let mut b = BytesMut::new();
        for (k, d) in items {
            b.put_u8(*k);
            put_lenenc_bytes(&mut b, d);
        }
        b
    }

    fn sysvar(name: &str, value: &str) -> Vec<u8> {
        let mut b = BytesMut::new();
        put_lenenc_bytes(&mut b, name.as_bytes());
        put_lenenc_bytes(&mut b, value.as_bytes());
        b.to_vec()
    }

    #[test]
    fn decodes_entries() {
        let tz = sysvar("time_zone", "+01:00");
        let b = block(&[(0, &tz), (1, b"\x04test"), (2, b"\x011")]);
        let got: Vec<_> = entries(&b).filter_map(|e| e.change()).collect();
        assert_eq!(
            got,
            vec![
                Change::SystemVariable {
                    name: b"time_zone",
                    value: b"+01:00"
                },
                Change::Schema(b"test"),
                Change::StateChanged
            ]
        );
    }

    #[test]
    fn filters_to_client_defaults() {
        let tz = sysvar("time_zone", "+01:00");
        let mode = sysvar("sql_mode", "ANSI");
        let b = block(&[(0, &tz), (0, &mode), (1, b"\x04test"), (2, b"\x011")]);
        let t = ClientTrackers {
            schema: true,
            state_change: false,
            system_variables: Some(vec!["time_zone".into(), "autocommit".into()]),
            transaction_info: false,
        };
        let out = t.filter(&b).expect("something removed");
        assert_eq!(out, block(&[(0, &tz), (1, b"\x04test")]));
        let all = ClientTrackers {
            schema: true,
            state_change: true,
            system_variables: None,
            transaction_info: true,
        };
        assert_eq!(all.filter(&b), None);
    }

    #[test]
    fn malformed_block_stops() {
        assert_eq!(entries(&[0, 9, 1]).count(), 0);
    }
}
