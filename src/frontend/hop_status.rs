//! Status variables that describe the client's own connection:
//! `Compression`, `Ssl_cipher` and `Ssl_version`.
//!
//! Each describes one hop, and the server answers for the hop it sees: the
//! backend connection (never compressed; plain unless `backend.tls`, and
//! then with the cipher myplex negotiated with it). A client connected
//! directly sees its own connection's values. For clients whose hop
//! differs from their backend's, the proxy rewrites those cells in rows of
//! the server's status tables (`SHOW [SESSION|GLOBAL] STATUS`,
//! `information_schema.SESSION_STATUS` / `GLOBAL_STATUS`) whose result
//! carries both the name and the value column, recognised by their column
//! metadata (schema, original table and column names), in the text and the
//! binary protocol. A query that selects the value without the name column
//! cannot be recognised and shows the backend hop's value (documented in
//! `docs/compatibility.md`).

use std::sync::Arc;

use crate::protocol::lenenc::{Reader, put_lenenc_bytes};

/// What the client's hop shows for the variables the backend hop answers
/// differently: lowercase name, value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopStatus {
    entries: Vec<(&'static [u8], Vec<u8>)>,
}

/// The client hop's TLS session, named as the server's TLS library names
/// it (OpenSSL: `TLS_AES_256_GCM_SHA384`, `ECDHE-RSA-AES128-GCM-SHA256`,
/// `TLSv1.3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSession {
    pub cipher: String,
    pub version: &'static str,
}

impl HopStatus {
    /// The values to show a client on a `compressed` hop, with `tls` (its
    /// TLS session, if any), whose backends use TLS when `backend_tls`;
    /// `None` when the backend hop already shows what the client's would.
    pub fn of(compressed: bool, tls: Option<TlsSession>, backend_tls: bool) -> Option<Arc<Self>> {
        let mut entries: Vec<(&'static [u8], Vec<u8>)> = Vec::new();
        if compressed {
            entries.push((b"compression", b"ON".to_vec()));
        }
        match tls {
            Some(t) => {
                entries.push((b"ssl_cipher", t.cipher.into_bytes()));
                entries.push((b"ssl_version", t.version.as_bytes().to_vec()));
            }
            None if backend_tls => {
                entries.push((b"ssl_cipher", Vec::new()));
                entries.push((b"ssl_version", Vec::new()));
            }
            None => {}
        }
        (!entries.is_empty()).then(|| Arc::new(Self { entries }))
    }

    /// The value to show for the variable `name` (any case).
    fn value(&self, name: &[u8]) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| &v[..])
    }
}

/// The OpenSSL name of a rustls cipher suite (the server reports those);
/// other suites by rustls's own name.
pub fn openssl_cipher_name(suite: rustls::CipherSuite) -> String {
    use rustls::CipherSuite as S;
    let name = match suite {
        S::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        S::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        S::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        other => return format!("{other:?}"),
    };
    name.to_string()
}

/// The OpenSSL name of a TLS protocol version (`SSL_get_version`).
pub fn openssl_version_name(v: rustls::ProtocolVersion) -> &'static str {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "unknown",
    }
}

/// Recognises the status columns of one result set and rewrites rows.
#[derive(Debug, Clone)]
pub struct StatusRewrite {
    hop: Arc<HopStatus>,
    columns: usize,
    seen: usize,
    name: Option<usize>,
    value: Option<usize>,
    /// Every column is length-encoded in binary rows (strings, decimals…).
    lenenc_only: bool,
    extended: bool,
}

/// Binary-protocol types whose values are length-encoded strings.
fn lenenc_type(t: u8) -> bool {
    matches!(t, 0x00 | 0x0f | 0x10 | 0xf5..=0xff)
}

impl StatusRewrite {
    /// A result set of `columns` columns, for a client whose hop shows
    /// `hop`, with (`extended`) or without MariaDB's extended type
    /// information.
    pub fn new(hop: Arc<HopStatus>, columns: u64, extended: bool) -> Self {
        Self {
            hop,
            columns: usize::try_from(columns).unwrap_or(usize::MAX),
            seen: 0,
            name: None,
            value: None,
            lenenc_only: true,
            extended,
        }
    }

    /// Feeds the next column definition.
    pub fn column(&mut self, def: &[u8]) {
        let i = self.seen;
        self.seen += 1;
        let mut r = Reader::new(def);
        let parsed = (|| {
            r.lenenc_bytes()?;
            let schema = r.lenenc_bytes()?;
            r.lenenc_bytes()?;
            let org_table = r.lenenc_bytes()?;
            r.lenenc_bytes()?;
            let org_name = r.lenenc_bytes()?;
            if self.extended {
                r.lenenc_bytes()?;
            }
            r.lenenc_int()?;
            r.u16()?;
            r.u32()?;
            let t = r.u8()?;
            Some((schema, org_table, org_name, t))
        })();
        let Some((schema, org_table, org_name, t)) = parsed else {
            self.lenenc_only = false;
            return;
        };
        self.lenenc_only &= lenenc_type(t);
        let status_table = schema.eq_ignore_ascii_case(b"information_schema")
            && (org_table.eq_ignore_ascii_case(b"SESSION_STATUS")
                || org_table.eq_ignore_ascii_case(b"GLOBAL_STATUS"));
        if !status_table {
            return;
        }
        if org_name.eq_ignore_ascii_case(b"VARIABLE_NAME") {
            self.name.get_or_insert(i);
        } else if org_name.eq_ignore_ascii_case(b"VARIABLE_VALUE") {
            self.value.get_or_insert(i);
        }
    }

    /// True when rows of this result set may need the rewrite.
    pub fn active(&self) -> bool {
        self.name.is_some() && self.value.is_some() && self.seen == self.columns
    }

    /// The row to send instead of `row` (a single-chunk payload), when it
    /// is the row of a variable the client's hop shows otherwise.
    pub fn rewrite(&self, row: &[u8], binary: bool) -> Option<Vec<u8>> {
        let (name, value) = (self.name?, self.value?);
        if !self.active() {
            return None;
        }
        let (start, bitmap) = if binary {
            if !self.lenenc_only || row.first() != Some(&0) {
                return None;
            }
            let bitmap_len = (self.columns + 7 + 2) / 8;
            (1 + bitmap_len, Some(row.get(1..1 + bitmap_len)?))
        } else {
            (0, None)
        };
        // Each cell as (start of its length prefix, data start, data end);
        // None = NULL.
        let mut cells: Vec<Option<(usize, usize, usize)>> = Vec::with_capacity(self.columns);
        let mut r = Reader::new(&row[start..]);
        for c in 0..self.columns {
            let at = row.len() - r.rest().len();
            let is_null = if let Some(bm) = bitmap {
                bm[(c + 2) / 8] & (1 << ((c + 2) % 8)) != 0
            } else if r.rest().first() == Some(&0xFB) {
                r.u8()?;
                true
            } else {
                false
            };
            if is_null {
                cells.push(None);
                continue;
            }
            let v = r.lenenc_bytes()?;
            let end = row.len() - r.rest().len();
            cells.push(Some((at, end - v.len(), end)));
        }
        if !r.is_empty() {
            return None;
        }
        let cell = |c: usize| -> Option<&[u8]> {
            let (_, from, to) = cells.get(c).copied().flatten()?;
            Some(&row[from..to])
        };
        let shown = self.hop.value(cell(name)?)?;
        if cell(value)? == shown {
            return None;
        }
        let (from, _, to) = cells[value]?;
        let mut out = Vec::with_capacity(row.len() + shown.len());
        out.extend_from_slice(&row[..from]);
        let mut b = bytes::BytesMut::new();
        put_lenenc_bytes(&mut b, shown);
        out.extend_from_slice(&b);
        out.extend_from_slice(&row[to..]);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Column definitions of `SHOW STATUS LIKE 'Compression'` from MariaDB 10.11.
    const NAME: &[u8] = b"\x03def\x12information_schema\x0eSESSION_STATUS\x0eSESSION_STATUS\rVariable_name\rVARIABLE_NAME\x0c-\x00\x00\x01\x00\x00\xfd\x01\x10\x00\x00\x00";
    const VALUE: &[u8] = b"\x03def\x12information_schema\x0eSESSION_STATUS\x0eSESSION_STATUS\x05Value\x0eVARIABLE_VALUE\x0c-\x00\x00@\x00\x00\xfd\x01\x10\x00\x00\x00";

    fn compressed() -> Arc<HopStatus> {
        HopStatus::of(true, None, false).expect("compressed")
    }

    fn show_status() -> StatusRewrite {
        let mut rw = StatusRewrite::new(compressed(), 2, false);
        rw.column(NAME);
        rw.column(VALUE);
        rw
    }

    #[test]
    fn text_row_rewritten() {
        let rw = show_status();
        assert!(rw.active());
        assert_eq!(
            rw.rewrite(b"\x0bCompression\x03OFF", false).as_deref(),
            Some(&b"\x0bCompression\x02ON"[..])
        );
        assert_eq!(
            rw.rewrite(b"\x0bCOMPRESSION\x03OFF", false).as_deref(),
            Some(&b"\x0bCOMPRESSION\x02ON"[..])
        );
        assert_eq!(rw.rewrite(b"\x07Uptime1\x0212", false), None);
        assert_eq!(rw.rewrite(b"\x0bCompression\x02ON", false), None);
        assert_eq!(rw.rewrite(b"\x0bCompression", false), None, "truncated");
    }

    #[test]
    fn binary_row_rewritten() {
        let rw = show_status();
        let row = b"\x00\x00\x0bCompression\x03OFF";
        assert_eq!(
            rw.rewrite(row, true).as_deref(),
            Some(&b"\x00\x00\x0bCompression\x02ON"[..])
        );
    }

    #[test]
    fn value_before_name_and_other_columns() {
        // SELECT VARIABLE_VALUE, 'x', VARIABLE_NAME FROM SESSION_STATUS.
        let other =
            b"\x03def\x00\x00\x00\x01x\x00\x0c-\x00\x04\x00\x00\x00\xfd\x01\x00\x27\x00\x00";
        let mut rw = StatusRewrite::new(compressed(), 3, false);
        rw.column(VALUE);
        rw.column(other);
        rw.column(NAME);
        assert_eq!(
            rw.rewrite(b"\x03OFF\x01x\x0bCompression", false).as_deref(),
            Some(&b"\x02ON\x01x\x0bCompression"[..])
        );
        assert_eq!(
            rw.rewrite(b"\x03OFF\xfb\x0bCompression", false).as_deref(),
            Some(&b"\x02ON\xfb\x0bCompression"[..])
        );
    }

    #[test]
    fn ordinary_tables_are_left_alone() {
        // A user table with the same column names.
        let name = b"\x03def\x04test\x01t\x01t\rVARIABLE_NAME\rVARIABLE_NAME\x0c-\x00\x00\x01\x00\x00\xfd\x01\x10\x00\x00\x00";
        let value = b"\x03def\x04test\x01t\x01t\x0eVARIABLE_VALUE\x0eVARIABLE_VALUE\x0c-\x00\x00@\x00\x00\xfd\x01\x10\x00\x00\x00";
        let mut rw = StatusRewrite::new(compressed(), 2, false);
        rw.column(name);
        rw.column(value);
        assert!(!rw.active());
        assert_eq!(rw.rewrite(b"\x0bCompression\x03OFF", false), None);
        // Only the value column: cannot tell which row.
        let mut rw = StatusRewrite::new(compressed(), 1, false);
        rw.column(VALUE);
        assert!(!rw.active());
    }

    #[test]
    fn tls_rows_show_the_clients_session() {
        let tls = TlsSession {
            cipher: "TLS_AES_256_GCM_SHA384".into(),
            version: "TLSv1.3",
        };
        let hop = HopStatus::of(false, Some(tls), false).expect("tls");
        let mut rw = StatusRewrite::new(hop, 2, false);
        rw.column(NAME);
        rw.column(VALUE);
        // A plain backend hop reports empty values.
        assert_eq!(
            rw.rewrite(b"\x0aSsl_cipher\x00", false).as_deref(),
            Some(&b"\x0aSsl_cipher\x16TLS_AES_256_GCM_SHA384"[..])
        );
        assert_eq!(
            rw.rewrite(b"\x0bSsl_version\x00", false).as_deref(),
            Some(&b"\x0bSsl_version\x07TLSv1.3"[..])
        );
        // Compression is not this client's to change here.
        assert_eq!(rw.rewrite(b"\x0bCompression\x03OFF", false), None);
        // A plain client behind TLS backends sees its own plain hop.
        let hop = HopStatus::of(false, None, true).expect("backend tls");
        let mut rw = StatusRewrite::new(hop, 2, false);
        rw.column(NAME);
        rw.column(VALUE);
        assert_eq!(
            rw.rewrite(b"\x0aSsl_cipher\x16TLS_AES_256_GCM_SHA384", false)
                .as_deref(),
            Some(&b"\x0aSsl_cipher\x00"[..])
        );
        assert_eq!(HopStatus::of(false, None, false), None);
        assert_eq!(
            openssl_cipher_name(rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            "ECDHE-RSA-AES128-GCM-SHA256"
        );
    }
}
