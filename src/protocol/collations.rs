//! The backend's collations (learned once from `information_schema`) and the
//! server's rule for a login collation: a collation the server does not know
//! gives the server's defaults (no error); a character set that cannot be a
//! client character set (ucs2, utf16, utf16le, utf32) refuses the login with
//! ER_WRONG_VALUE_FOR_VAR, before authentication, as MariaDB does.

use std::collections::HashMap;

use super::packets::ErrPacket;

/// ER_WRONG_VALUE_FOR_VAR.
pub const ER_WRONG_VALUE_FOR_VAR: u16 = 1231;

/// The query that lists the backend's collations (id, name, charset).
pub const COLLATIONS_SQL: &str = "SELECT ID, COLLATION_NAME, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL";

/// One collation of the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollationInfo {
    /// Collation name (`utf8mb4_general_ci`).
    pub name: String,
    /// Character set name (`utf8mb4`).
    pub charset: String,
}

/// The collations a backend knows, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collations {
    by_id: HashMap<u16, CollationInfo>,
}

/// What a login (or COM_CHANGE_USER) collation amounts to on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginCollation {
    /// The server knows it: the session's character set and collation.
    Known(u16),
    /// The server does not know it and uses its global defaults (for a
    /// server whose defaults were not changed with SET GLOBAL: the collation
    /// of its greeting).
    ServerDefault(u16),
}

impl LoginCollation {
    /// The collation id the session starts with.
    pub fn id(&self) -> u16 {
        match self {
            LoginCollation::Known(id) | LoginCollation::ServerDefault(id) => *id,
        }
    }
}

impl Collations {
    /// Builds the table from `(id, name, charset)` rows.
    pub fn from_rows(rows: impl IntoIterator<Item = (u16, String, String)>) -> Self {
        Self {
            by_id: rows
                .into_iter()
                .map(|(id, name, charset)| (id, CollationInfo { name, charset }))
                .collect(),
        }
    }

    /// Number of collations known.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True when nothing was learned.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Looks a collation up.
    pub fn get(&self, id: u16) -> Option<&CollationInfo> {
        self.by_id.get(&id)
    }

    /// The server's rule for a handshake collation `requested`, given the
    /// collation of the server's greeting: unknown ids fall back to the
    /// server's defaults, character sets that cannot be client character
    /// sets are refused with the server's exact error.
    pub fn login(&self, requested: u16, server_default: u16) -> Result<LoginCollation, ErrPacket> {
        let Some(c) = self.get(requested) else {
            return Ok(LoginCollation::ServerDefault(server_default));
        };
        if !is_parser_charset(&c.charset) {
            return Err(wrong_client_charset(&c.charset));
        }
        Ok(LoginCollation::Known(requested))
    }
}

/// Ids from here up (in the one-byte handshake field) are MySQL 8's only
/// (gb18030, `utf8mb4_0900_ai_ci` = 255): no MariaDB knows them.
const FIRST_MYSQL_ONLY_ID: u16 = 248;

/// The server's rule for a login collation while its table was never
/// learned (the backend not reached yet): ids MariaDB has known in every
/// supported version keep their meaning (and client-unusable character sets
/// are refused as the server refuses them); MySQL-only and unknown ids get
/// the server's defaults — the collation of the greeting the client got.
/// Using such an id as is would make every statement of the session fail
/// with 1273 once a backend runs it.
pub fn login_unlearned(requested: u16, server_default: u16) -> Result<LoginCollation, ErrPacket> {
    let c = mysql_common::collations::Collation::resolve(
        mysql_common::collations::CollationId::from(requested),
    );
    if requested >= FIRST_MYSQL_ONLY_ID
        || c.id == mysql_common::collations::CollationId::UNKNOWN_COLLATION_ID
    {
        return Ok(LoginCollation::ServerDefault(server_default));
    }
    if !is_parser_charset(c.charset) {
        return Err(wrong_client_charset(c.charset));
    }
    Ok(LoginCollation::Known(requested))
}

/// Character sets the server's parser cannot read (fixed multi-byte
/// minimum length): never allowed as `character_set_client`.
pub fn is_parser_charset(charset: &str) -> bool {
    !matches!(charset, "ucs2" | "utf16" | "utf16le" | "utf32")
}

/// `ERROR 1231 (42000): Variable 'character_set_client' can't be set to the
/// value of 'ucs2'`, as MariaDB sends it for such a login.
pub fn wrong_client_charset(charset: &str) -> ErrPacket {
    ErrPacket::new(
        ER_WRONG_VALUE_FOR_VAR,
        "42000",
        format!("Variable 'character_set_client' can't be set to the value of '{charset}'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn table() -> Collations {
        Collations::from_rows([
            (8, "latin1_swedish_ci".into(), "latin1".into()),
            (35, "ucs2_general_ci".into(), "ucs2".into()),
            (45, "utf8mb4_general_ci".into(), "utf8mb4".into()),
            (56, "utf16le_general_ci".into(), "utf16le".into()),
            (224, "utf8mb4_unicode_ci".into(), "utf8mb4".into()),
        ])
    }

    #[test]
    fn known_unknown_and_refused() {
        let t = table();
        assert_eq!(t.login(224, 8), Ok(LoginCollation::Known(224)));
        // MySQL 8's utf8mb4_0900_ai_ci is unknown to MariaDB 10.11.
        assert_eq!(t.login(255, 8), Ok(LoginCollation::ServerDefault(8)));
        assert_eq!(t.login(255, 8).map(|c| c.id()), Ok(8));
        let e = t.login(56, 8).expect_err("utf16le is refused");
        assert_eq!(e.code, 1231);
        assert_eq!(&e.state, b"42000");
        assert_eq!(
            e.message,
            "Variable 'character_set_client' can't be set to the value of 'utf16le'"
        );
    }

    #[test]
    fn unlearned_table_maps_mysql_only_ids_to_the_default() {
        assert_eq!(
            login_unlearned(255, 45),
            Ok(LoginCollation::ServerDefault(45))
        );
        assert_eq!(
            login_unlearned(248, 45),
            Ok(LoginCollation::ServerDefault(45))
        );
        assert_eq!(login_unlearned(224, 45), Ok(LoginCollation::Known(224)));
        assert_eq!(login_unlearned(8, 45), Ok(LoginCollation::Known(8)));
        let e = login_unlearned(35, 45).expect_err("ucs2 is refused");
        assert_eq!(e.code, ER_WRONG_VALUE_FOR_VAR);
    }

    #[test]
    fn refusal_bytes_match_the_server() {
        // MariaDB 10.11.19's reply to a handshake with collation 35, captured.
        let mut b = BytesMut::new();
        table().login(35, 8).expect_err("ucs2").write(&mut b);
        let mut want = vec![0xff, 0xcf, 0x04, b'#'];
        want.extend_from_slice(
            b"42000Variable 'character_set_client' can't be set to the value of 'ucs2'",
        );
        assert_eq!(&b[..], &want[..]);
    }
}
