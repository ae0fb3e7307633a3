//! Whether a statement leaves the server's diagnostics area (the warning
//! list `SHOW WARNINGS`, `@@warning_count` and `GET DIAGNOSTICS` read) as it
//! found it. MariaDB clears the list when a statement uses tables
//! (`mysql_execute_command`, also at COM_STMT_PREPARE) or raises a condition
//! of its own; statements that read the list, and statements that touch no
//! table (`SELECT 1`, `SET @a = 2`, `DO …`), keep it.
//!
//! The answer only decides how long a session stays on the backend that
//! holds its diagnostics: a statement wrongly said to keep the list keeps
//! the session there one statement longer (what the server shows is then
//! what the client sees, as direct); one wrongly said to clear it lets the
//! list go early. So a statement is said to keep the list only when its
//! text shows no table at all.

use super::effects::{Kind, analyze};
use super::lexer::{LexOptions, Lexer, Token, TokenKind};

/// Words that bring a table (or a sequence, which is a table) into a
/// statement without a FROM: `TABLE t`, `NEXT VALUE FOR s`, `NEXTVAL(s)`.
const TABLE_WORDS: [&[u8]; 7] = [
    b"from",
    b"table",
    b"next",
    b"previous",
    b"nextval",
    b"lastval",
    b"setval",
];

/// What a query does to the diagnostics area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagnosticsUse {
    /// Every statement only reads it (`SHOW WARNINGS`, `SHOW COUNT(*)
    /// ERRORS`, `GET DIAGNOSTICS`, `SELECT @@warning_count`).
    Reads,
    /// It is kept: every statement reads it or is a `SELECT`, `SET`, `DO`
    /// or `VALUES` that names no table.
    Keeps,
    /// It may be cleared (or the text cannot be read reliably).
    Clears,
}

/// What the statements of `sql` do to the diagnostics area.
pub fn keeps_diagnostics(sql: &[u8], opts: LexOptions) -> DiagnosticsUse {
    let a = analyze(sql, opts);
    if a.incomplete {
        return DiagnosticsUse::Clears;
    }
    let mut all = DiagnosticsUse::Reads;
    for s in &a.statements {
        let text = &sql[s.span.clone()];
        let tokens: Vec<Token> = Lexer::new(text, opts).collect();
        let names_table = tokens
            .iter()
            .any(|t| t.kind == TokenKind::Word && TABLE_WORDS.iter().any(|w| t.is_word(text, w)));
        let this = match s.kind {
            Kind::Show if reads_diagnostics(text, &tokens) => DiagnosticsUse::Reads,
            Kind::GetDiagnostics => DiagnosticsUse::Reads,
            Kind::Select if reads_counts(text, &tokens) => DiagnosticsUse::Reads,
            Kind::Select | Kind::Set | Kind::Do | Kind::Values if !names_table => {
                DiagnosticsUse::Keeps
            }
            _ => return DiagnosticsUse::Clears,
        };
        if this == DiagnosticsUse::Keeps {
            all = DiagnosticsUse::Keeps;
        }
    }
    all
}

/// `SELECT` of nothing but `@@warning_count` / `@@error_count` (any scope
/// prefix), separated by commas.
fn reads_counts(text: &[u8], tokens: &[Token]) -> bool {
    let items = &tokens[1.min(tokens.len())..];
    !items.is_empty()
        && items.len() % 2 == 1
        && items.iter().enumerate().all(|(i, t)| {
            if i % 2 == 1 {
                return t.is_symbol(text, b",");
            }
            t.kind == TokenKind::SysVar && {
                let name = t.text(text);
                let name = name.rsplit(|&c| c == b'.').next().unwrap_or(name);
                let name = name.strip_prefix(b"@@").unwrap_or(name);
                name.eq_ignore_ascii_case(b"warning_count")
                    || name.eq_ignore_ascii_case(b"error_count")
            }
        })
}

/// `SHOW WARNINGS …`, `SHOW ERRORS …`, `SHOW COUNT(*) WARNINGS|ERRORS`.
fn reads_diagnostics(text: &[u8], tokens: &[Token]) -> bool {
    let list = |t: Option<&Token>| {
        t.is_some_and(|t| t.is_word(text, b"warnings") || t.is_word(text, b"errors"))
    };
    let count = tokens.get(1).is_some_and(|t| t.is_word(text, b"count"))
        && tokens.get(2).is_some_and(|t| t.is_symbol(text, b"("))
        && tokens.get(3).is_some_and(|t| t.is_symbol(text, b"*"))
        && tokens.get(4).is_some_and(|t| t.is_symbol(text, b")"));
    list(tokens.get(1)) || (count && list(tokens.get(5)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeps(sql: &str) -> bool {
        keeps_diagnostics(sql.as_bytes(), LexOptions::default()) != DiagnosticsUse::Clears
    }

    fn reads(sql: &str) -> bool {
        keeps_diagnostics(sql.as_bytes(), LexOptions::default()) == DiagnosticsUse::Reads
    }

    #[test]
    fn reading_the_area_keeps_it() {
        for sql in [
            "SHOW WARNINGS",
            "show  warnings limit 1, 2",
            "/* probe */ SHOW ERRORS",
            "SHOW COUNT(*) WARNINGS",
            "show count( * ) errors",
            "GET DIAGNOSTICS @n = NUMBER",
            "GET CURRENT DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT",
            "SELECT @@warning_count",
            "SELECT @@session.error_count, @@warning_count",
            "SHOW WARNINGS; select @@ERROR_COUNT",
        ] {
            assert!(reads(sql), "{sql}");
        }
        for sql in [
            "SELECT @@warning_count + 1",
            "SELECT @@warning_count, 1",
            "SELECT 1",
        ] {
            assert!(keeps(sql) && !reads(sql), "{sql}");
        }
    }

    #[test]
    fn statements_without_tables_keep_it() {
        for sql in [
            "SELECT 1",
            "select 1 + 1 as two, 'from the table' AS `from`",
            "SET @a = 1",
            "SET sql_mode = ''",
            "DO SLEEP(0)",
            "VALUES (1), (2)",
            "SELECT 1; SHOW WARNINGS",
            "SELECT @x := 3",
        ] {
            assert!(keeps(sql), "{sql}");
        }
    }

    #[test]
    fn statements_with_tables_or_unknown_effects_clear_it() {
        for sql in [
            "SELECT * FROM t1",
            "SELECT 1 FROM DUAL",
            "SELECT (SELECT MAX(a) FROM t1)",
            "SET @a = (SELECT COUNT(*) FROM t1)",
            "SELECT NEXT VALUE FOR s1",
            "SELECT NEXTVAL(s1)",
            "TABLE t1",
            "SELECT 1 WHERE EXISTS (TABLE t1)",
            "INSERT INTO t1 VALUES (1)",
            "CALL p1()",
            "SHOW TABLES",
            "SHOW VARIABLES LIKE 'warnings'",
            "SELECT 1; SELECT * FROM t1",
            "DROP TABLE IF EXISTS t1",
            "SELECT 'unterminated",
            "",
        ] {
            assert!(!keeps(sql), "{sql}");
        }
    }
}
