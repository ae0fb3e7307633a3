//! Recognition and evaluation of the locally answered admin statements.

use super::*;
use crate::session_state::TrackedState;

fn vars() -> ServerVars {
    let mut v = ServerVars::default();
    let mut add = |n: &str, s: Option<&str>, g: Option<&str>, scope: &str, ty: &str| {
        v.vars.insert(
            n.into(),
            VarInfo {
                session: s.map(Into::into),
                global: g.map(Into::into),
                scope: scope.into(),
                ty: ty.into(),
            },
        );
    };
    add("autocommit", Some("ON"), Some("ON"), "SESSION", "BOOLEAN");
    add(
        "version_comment",
        None,
        Some("MariaDB Server"),
        "GLOBAL",
        "VARCHAR",
    );
    add(
        "max_allowed_packet",
        Some("16777216"),
        Some("16777216"),
        "SESSION",
        "BIGINT UNSIGNED",
    );
    add(
        "sql_mode",
        Some("STRICT_TRANS_TABLES"),
        Some("STRICT_TRANS_TABLES"),
        "SESSION",
        "SET",
    );
    add(
        "old_mode",
        Some("UTF8_IS_UTF8MB3"),
        Some("UTF8_IS_UTF8MB3"),
        "SESSION",
        "SET",
    );
    add(
        "warning_count",
        Some("0"),
        None,
        "SESSION ONLY",
        "BIGINT UNSIGNED",
    );
    for n in [
        "character_set_client",
        "character_set_connection",
        "character_set_results",
        "collation_connection",
        "time_zone",
        "tx_isolation",
    ] {
        add(n, Some("x"), Some("x"), "SESSION", "VARCHAR");
    }
    for (c, cs, d) in [
        ("utf8mb4_general_ci", "utf8mb4", true),
        ("utf8mb4_unicode_ci", "utf8mb4", false),
        ("utf8mb3_general_ci", "utf8mb3", true),
        ("latin1_swedish_ci", "latin1", true),
    ] {
        if d {
            v.charsets.insert(cs.into(), c.into());
        }
        v.collations.insert(c.into(), cs.into());
    }
    v
}

fn run(sql: &str) -> Option<Answer> {
    let st = TrackedState::for_collation(45);
    let s = SessionView {
        state: &st,
        status: crate::protocol::packets::status::AUTOCOMMIT,
        interactive: false,
        ignore_space: false,
    };
    answer(sql.as_bytes(), Default::default(), &vars(), &s)
}

fn set_vars(sql: &str) -> Vec<(String, String)> {
    match run(sql) {
        Some(Answer::Set { vars, .. }) => vars,
        other => panic!("{sql}: {other:?}"),
    }
}

#[test]
fn driver_connect_sets() {
    // PyMySQL
    let v = set_vars("SET NAMES utf8mb4");
    assert!(v.contains(&("collation_connection".into(), "utf8mb4_general_ci".into())));
    assert!(v.contains(&("character_set_results".into(), "utf8mb4".into())));
    assert_eq!(
        run("SET AUTOCOMMIT = 0"),
        Some(Answer::Set {
            vars: vec![("autocommit".into(), "OFF".into())],
            autocommit: Some(false)
        })
    );
    // mysql-connector-python
    let v = set_vars("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'");
    assert!(v.contains(&("collation_connection".into(), "utf8mb4_unicode_ci".into())));
    assert!(matches!(
        run("SET @@session.autocommit = OFF"),
        Some(Answer::Set {
            autocommit: Some(false),
            ..
        })
    ));
    assert_eq!(
        set_vars("SET NAMES utf8"),
        set_vars("SET NAMES utf8mb3 COLLATE utf8mb3_general_ci")
    );
    assert_eq!(
        set_vars("set sql_mode='strict_trans_tables,ansi_quotes'"),
        vec![("sql_mode".into(), "ANSI_QUOTES,STRICT_TRANS_TABLES".into())]
    );
    assert_eq!(
        set_vars("SET time_zone = '+0:00', SESSION tx_isolation='read committed';"),
        vec![
            ("time_zone".into(), "+00:00".into()),
            ("tx_isolation".into(), "READ-COMMITTED".into())
        ]
    );
}

#[test]
fn anything_else_goes_to_the_server() {
    for q in [
        "SET NAMES bogus",
        "SET NAMES utf8mb4 COLLATE latin1_swedish_ci",
        "SET GLOBAL autocommit=0",
        "SET autocommit=2",
        "SET autocommit=@x",
        "SET sql_mode=CONCAT(@@sql_mode, ',ANSI')",
        "SET sql_mode='TRADITIONAL'",
        "SET time_zone='Europe/Paris'",
        "SET @a=1",
        "SET unknown_var=1",
        "SET NAMES utf8mb4; DROP TABLE t",
        "SET /*!NAMES*/ utf8mb4",
        "SET PASSWORD = 'x'",
        "SELECT @@version_comment FROM dual",
        "SELECT @@last_insert_id",
        "SELECT @@session.version_comment",
        "SELECT @@global.warning_count",
        "SELECT @@autocommit + 1",
        "SELECT 1",
        "SELECT @@a.b.c",
    ] {
        assert_eq!(run(q), None, "{q}");
    }
}

#[test]
fn selects_of_variables() {
    let Some(Answer::Row(cols)) = run("select @@version_comment limit 1") else {
        panic!()
    };
    assert_eq!(
        cols,
        vec![(
            "@@version_comment".into(),
            ColumnType::Text,
            Some("MariaDB Server".into())
        )]
    );
    let Some(Answer::Row(cols)) =
        run("SELECT @@session.autocommit, @@max_allowed_packet AS m, @@character_set_client cs")
    else {
        panic!()
    };
    assert_eq!(cols[0].0, "@@session.autocommit");
    assert_eq!(cols[0].2.as_deref(), Some("1"));
    assert_eq!(cols[1].0, "m");
    assert_eq!(cols[1].1, ColumnType::Integer { unsigned: true });
    assert_eq!(
        cols[2],
        ("cs".into(), ColumnType::Text, Some("utf8mb4".into()))
    );
}
