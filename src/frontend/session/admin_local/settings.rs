//! Session assignments answered locally: which variables, which literal
//! values, and the value the server's tracker would report for them.

use super::ServerVars;

/// The base sql_mode flags of MariaDB 10.11 (combination modes such as
/// ANSI or TRADITIONAL expand on the server: not answered here).
const SQL_MODES: &[&str] = &[
    "ALLOW_INVALID_DATES",
    "ANSI_QUOTES",
    "EMPTY_STRING_IS_NULL",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "HIGH_NOT_PRECEDENCE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "IGNORE_SPACE",
    "NO_AUTO_CREATE_USER",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "NO_DIR_IN_CREATE",
    "NO_ENGINE_SUBSTITUTION",
    "NO_FIELD_OPTIONS",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_ZERO_DATE",
    "NO_ZERO_IN_DATE",
    "ONLY_FULL_GROUP_BY",
    "PAD_CHAR_TO_FULL_LENGTH",
    "PIPES_AS_CONCAT",
    "REAL_AS_FLOAT",
    "SIMULTANEOUS_ASSIGNMENT",
    "STRICT_ALL_TABLES",
    "STRICT_TRANS_TABLES",
    "TIME_ROUND_FRACTIONAL",
];

/// The value a session assignment of `name` to the literal `raw` leaves,
/// as the server's tracker reports it; `None` when the variable is not
/// answered here or the server might refuse or transform the value.
pub(super) fn setting(name: &str, raw: &str, vars: &ServerVars) -> Option<String> {
    let bool_value = || match raw.to_ascii_uppercase().as_str() {
        "1" | "ON" | "TRUE" => Some("ON".to_string()),
        "0" | "OFF" | "FALSE" => Some("OFF".to_string()),
        _ => None,
    };
    match name {
        "autocommit" | "transaction_read_only" | "tx_read_only" => bool_value(),
        "character_set_client" | "character_set_connection" | "character_set_results" => {
            vars.charset(raw)
        }
        "collation_connection" => vars.collation(raw).map(|(c, _)| c),
        "sql_mode" => {
            let mut modes: Vec<String> = Vec::new();
            for m in raw.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                let m = m.to_ascii_uppercase();
                if !SQL_MODES.contains(&m.as_str()) {
                    return None;
                }
                if !modes.contains(&m) {
                    modes.push(m);
                }
            }
            // The server reports the flags in its own order.
            modes.sort_by_key(|m| SQL_MODE_ORDER.iter().position(|o| o == m));
            Some(modes.join(","))
        }
        "time_zone" => {
            if raw.eq_ignore_ascii_case("system") {
                return Some("SYSTEM".into());
            }
            let (sign, hm) = raw.split_at_checked(1)?;
            let (h, m) = hm.split_once(':')?;
            let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
            let ok = match sign {
                "+" => h < 13 || (h == 13 && m == 0),
                "-" => h < 13,
                _ => false,
            };
            (ok && m < 60 && hm.len() <= 5).then(|| format!("{sign}{h:02}:{m:02}"))
        }
        "tx_isolation" | "transaction_isolation" => {
            let v = raw.to_ascii_uppercase().replace(' ', "-");
            [
                "READ-UNCOMMITTED",
                "READ-COMMITTED",
                "REPEATABLE-READ",
                "SERIALIZABLE",
            ]
            .contains(&v.as_str())
            .then_some(v)
        }
        "wait_timeout" | "interactive_timeout" | "net_read_timeout" | "net_write_timeout" => {
            let n: u64 = raw.parse().ok()?;
            (1..=31_536_000).contains(&n).then(|| n.to_string())
        }
        _ => None,
    }
}

/// The order the server lists sql_mode flags in (its bit order).
const SQL_MODE_ORDER: &[&str] = &[
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_FIELD_OPTIONS",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "NO_AUTO_CREATE_USER",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "EMPTY_STRING_IS_NULL",
    "SIMULTANEOUS_ASSIGNMENT",
    "TIME_ROUND_FRACTIONAL",
];
