//! Control packets the proxy reads or writes itself: OK, EOF, ERR and the
//! result-set terminator. Rows and column definitions never pass through
//! here; they are forwarded as bytes.

use bytes::{BufMut, BytesMut};

use super::lenenc::{Reader, put_lenenc_bytes, put_lenenc_int};

/// First payload byte of an OK packet.
pub const OK_HEADER: u8 = 0x00;
/// First payload byte of an ERR packet.
pub const ERR_HEADER: u8 = 0xFF;
/// First payload byte of an EOF packet or (with DEPRECATE_EOF) a terminator OK.
pub const EOF_HEADER: u8 = 0xFE;
/// First payload byte of a LOCAL INFILE request.
pub const LOCAL_INFILE_HEADER: u8 = 0xFB;

/// Server status flags (`SERVER_STATUS_*`).
pub mod status {
    /// A transaction is open.
    pub const IN_TRANS: u16 = 0x0001;
    /// Autocommit is on.
    pub const AUTOCOMMIT: u16 = 0x0002;
    /// Another result set follows.
    pub const MORE_RESULTS_EXISTS: u16 = 0x0008;
    /// The session's sql_mode has NO_BACKSLASH_ESCAPES.
    pub const NO_BACKSLASH_ESCAPES: u16 = 0x0200;
    /// The session's sql_mode has ANSI_QUOTES (MariaDB).
    pub const ANSI_QUOTES: u16 = 0x8000;
    /// The flags a new server session starts with, from the globals
    /// (`THD::init`): what a greeting, a login OK and the OK of
    /// COM_RESET_CONNECTION / COM_CHANGE_USER report before any statement.
    pub const SESSION_DEFAULTS: u16 = AUTOCOMMIT | NO_BACKSLASH_ESCAPES | ANSI_QUOTES;
    /// A read-only cursor is open on the statement.
    pub const CURSOR_EXISTS: u16 = 0x0040;
    /// The last row of a cursor was sent.
    pub const LAST_ROW_SENT: u16 = 0x0080;
    /// Result-set metadata changed since the statement was prepared.
    pub const METADATA_CHANGED: u16 = 0x0400;
    /// The OK carries session-state information.
    pub const SESSION_STATE_CHANGED: u16 = 0x4000;
    /// Flags that describe one statement's result, not the session: the
    /// server clears them before each command (`SERVER_STATUS_CLEAR_SET`
    /// and the session-state flag), so an answer the proxy makes itself
    /// (COM_PING, a local SELECT) must not repeat them. Kept: IN_TRANS,
    /// AUTOCOMMIT, NO_BACKSLASH_ESCAPES, IN_TRANS_READONLY, ANSI_QUOTES.
    /// Found: MORE_RESULTS_EXISTS left over from a multi-statement that
    /// ended in an error made libmysqlclient answer the next PING with
    /// "Commands out of sync".
    pub const TRANSIENT: u16 = MORE_RESULTS_EXISTS
        | 0x0010 // QUERY_NO_GOOD_INDEX_USED
        | 0x0020 // QUERY_NO_INDEX_USED
        | CURSOR_EXISTS
        | LAST_ROW_SENT
        | 0x0100 // DB_DROPPED
        | METADATA_CHANGED
        | 0x0800 // QUERY_WAS_SLOW
        | 0x1000 // PS_OUT_PARAMS
        | SESSION_STATE_CHANGED;
}

/// A parsed OK packet (also used for the 0xFE terminator under DEPRECATE_EOF).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OkPacket<'a> {
    /// Header byte, 0x00 or 0xFE.
    pub header: u8,
    /// Rows affected.
    pub affected_rows: u64,
    /// Last insert id.
    pub last_insert_id: u64,
    /// Status flags.
    pub status: u16,
    /// Warning count.
    pub warnings: u16,
    /// Human-readable info ("Rows matched: …").
    pub info: &'a [u8],
    /// Raw session-state block (only when SESSION_STATE_CHANGED is set).
    pub session_state: &'a [u8],
}

impl<'a> OkPacket<'a> {
    /// Parses an OK packet sent with CLIENT_SESSION_TRACK negotiated (which is
    /// how every backend connection of ours talks).
    pub fn parse(payload: &'a [u8]) -> Option<Self> {
        let mut r = Reader::new(payload);
        let header = r.u8()?;
        if header != OK_HEADER && header != EOF_HEADER {
            return None;
        }
        let affected_rows = r.lenenc_int()?;
        let last_insert_id = r.lenenc_int()?;
        let status = r.u16()?;
        let warnings = r.u16()?;
        let mut ok = OkPacket {
            header,
            affected_rows,
            last_insert_id,
            status,
            warnings,
            info: &[],
            session_state: &[],
        };
        if !r.is_empty() {
            ok.info = r.lenenc_bytes()?;
            if status & status::SESSION_STATE_CHANGED != 0 && !r.is_empty() {
                ok.session_state = r.lenenc_bytes()?;
            }
        }
        Some(ok)
    }

    /// Serializes for a client. With `session_track` the session-state block
    /// is written as given; without it, it is dropped along with the flag.
    pub fn write(&self, out: &mut BytesMut, session_track: bool) {
        out.put_u8(self.header);
        put_lenenc_int(out, self.affected_rows);
        put_lenenc_int(out, self.last_insert_id);
        let has_state = session_track && !self.session_state.is_empty();
        let mut status = self.status;
        if !has_state {
            status &= !status::SESSION_STATE_CHANGED;
        }
        out.put_u16_le(status);
        out.put_u16_le(self.warnings);
        if has_state || !self.info.is_empty() {
            put_lenenc_bytes(out, self.info);
        }
        if has_state {
            put_lenenc_bytes(out, self.session_state);
        }
    }
}

/// Writes an OK payload with no session state.
pub fn ok_payload(out: &mut BytesMut, affected_rows: u64, status: u16, warnings: u16) {
    OkPacket {
        header: OK_HEADER,
        affected_rows,
        status,
        warnings,
        ..Default::default()
    }
    .write(out, false);
}

/// Writes a classic 5-byte EOF payload.
pub fn eof_payload(out: &mut BytesMut, warnings: u16, status: u16) {
    out.put_u8(EOF_HEADER);
    out.put_u16_le(warnings);
    out.put_u16_le(status & !status::SESSION_STATE_CHANGED);
}

/// Parses the status flags and warnings out of a classic EOF payload.
pub fn parse_eof(payload: &[u8]) -> Option<(u16, u16)> {
    let mut r = Reader::new(payload);
    (r.u8()? == EOF_HEADER).then_some(())?;
    let warnings = r.u16()?;
    let status = r.u16()?;
    Some((warnings, status))
}

/// An error the proxy reports to a client (or read from a backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket {
    /// MySQL error code.
    pub code: u16,
    /// Five-character SQLSTATE.
    pub state: [u8; 5],
    /// Message text.
    pub message: String,
}

impl ErrPacket {
    /// Builds an error from its parts.
    pub fn new(code: u16, state: &str, message: impl Into<String>) -> Self {
        let mut s = [b'H', b'Y', b'0', b'0', b'0'];
        let b = state.as_bytes();
        if b.len() == 5 {
            s.copy_from_slice(b);
        }
        Self {
            code,
            state: s,
            message: message.into(),
        }
    }

    /// Writes the ERR payload (protocol 4.1 form, with SQLSTATE).
    pub fn write(&self, out: &mut BytesMut) {
        out.put_u8(ERR_HEADER);
        out.put_u16_le(self.code);
        out.put_u8(b'#');
        out.put_slice(&self.state);
        out.put_slice(self.message.as_bytes());
    }

    /// Parses an ERR payload.
    pub fn parse(payload: &[u8]) -> Option<Self> {
        let mut r = Reader::new(payload);
        (r.u8()? == ERR_HEADER).then_some(())?;
        let code = r.u16()?;
        let mut state = *b"HY000";
        if r.rest().first() == Some(&b'#') {
            r.u8()?;
            state.copy_from_slice(r.bytes(5)?);
        }
        Some(Self {
            code,
            state,
            message: String::from_utf8_lossy(r.rest()).into_owned(),
        })
    }
}

impl std::fmt::Display for ErrPacket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code,
            String::from_utf8_lossy(&self.state),
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An OK as MariaDB 10.11 sends it after `USE test` with only the schema
    // tracker on: affected 0, insert id 0, status 0x4002 (autocommit +
    // state changed), warnings 0, info "", state: schema change "test".
    const OK_USE_TEST: &[u8] = &[
        0x00, 0x00, 0x00, 0x02, 0x40, 0x00, 0x00, 0x00, 0x07, 0x01, 0x05, 0x04, b't', b'e', b's',
        b't',
    ];

    #[test]
    fn parses_ok_with_session_state() {
        let ok = OkPacket::parse(OK_USE_TEST).expect("parse");
        assert_eq!(ok.status, 0x4002);
        assert_eq!(ok.info, b"");
        assert_eq!(
            ok.session_state,
            &[0x01, 0x05, 0x04, b't', b'e', b's', b't']
        );
        let mut out = BytesMut::new();
        ok.write(&mut out, true);
        assert_eq!(&out[..], OK_USE_TEST, "re-serialization is byte-exact");
        let mut out = BytesMut::new();
        ok.write(&mut out, false);
        assert_eq!(&out[..], &[0, 0, 0, 0x02, 0x00, 0, 0], "state stripped");
    }

    #[test]
    fn ok_with_info_keeps_info_without_tracking() {
        let mut src = BytesMut::new();
        OkPacket {
            header: 0,
            affected_rows: 3,
            last_insert_id: 7,
            status: 2,
            warnings: 1,
            info: b"Rows matched: 3  Changed: 3  Warnings: 1",
            session_state: &[],
        }
        .write(&mut src, true);
        let ok = OkPacket::parse(&src).expect("parse");
        assert_eq!(ok.affected_rows, 3);
        assert_eq!(ok.last_insert_id, 7);
        assert_eq!(ok.warnings, 1);
        let mut out = BytesMut::new();
        ok.write(&mut out, false);
        assert_eq!(out, src);
    }

    #[test]
    fn terminator_ok_and_eof() {
        // DEPRECATE_EOF terminator: 0xFE 00 00 status warnings
        let t = [0xFE, 0, 0, 0x22, 0x00, 0x01, 0x00];
        let ok = OkPacket::parse(&t).expect("parse");
        assert_eq!(ok.header, EOF_HEADER);
        assert_eq!(ok.status, 0x22);
        assert_eq!(ok.warnings, 1);
        let mut out = BytesMut::new();
        eof_payload(&mut out, ok.warnings, ok.status);
        assert_eq!(&out[..], &[0xFE, 0x01, 0x00, 0x22, 0x00]);
        assert_eq!(parse_eof(&out), Some((1, 0x22)));
    }

    #[test]
    fn err_roundtrip_and_truncation() {
        let e = ErrPacket::new(1045, "28000", "Access denied for user 'x'@'y'");
        let mut out = BytesMut::new();
        e.write(&mut out);
        assert_eq!(&out[..3], &[0xFF, 0x15, 0x04]);
        assert_eq!(ErrPacket::parse(&out), Some(e));
        assert_eq!(ErrPacket::parse(&[0xFF, 0x15]), None);
        assert_eq!(OkPacket::parse(&[0x00, 0xFC]), None);
    }
}
