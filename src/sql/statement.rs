//! The leading verb of a statement and the effects read from its structure
//! (SET lists, DROP/RENAME lists, KILL, HANDLER, PREPARE, …).
//!
//! Owns statement-level grammar only, and only as much of it as the effects
//! need; expression-level patterns are in `observe`. Each parser consumes
//! tokens of the current (inner) statement from the `Reader`; whatever it
//! leaves is drained (and observed) by the caller.

use super::blocks::Body;
use super::ddl::{alter, create, drop, rename};
use super::effects::{Effect, KillTarget, Kind};
use super::lexer::{Token, TokenKind};
use super::reader::{Reader, lower};
use super::set::set;

/// Where a statement stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ctx {
    /// A top-level statement of the query.
    Top,
    /// An inner statement of a compound statement.
    Compound,
    /// The statement after `SET STATEMENT … FOR`.
    Inner,
}

/// Reads a top-level statement (the caller drains what is left).
pub(super) fn top(r: &mut Reader) -> Kind {
    let kind = unit(r, Ctx::Top);
    if kind == Kind::Compound {
        loop {
            r.observe = true;
            unit(r, Ctx::Compound);
            r.drain_unit();
            if r.stmt_done() {
                break;
            }
            r.next_unit();
        }
    }
    kind
}

/// The verb's bytes, lowercased, if short enough to be a verb.
fn verb(sql: &[u8], t: &Token) -> ([u8; 16], usize) {
    let mut buf = [0u8; 16];
    let text = t.text(sql);
    if t.kind != TokenKind::Word || text.len() > buf.len() {
        return (buf, 0);
    }
    buf[..text.len()].copy_from_slice(text);
    buf[..text.len()].make_ascii_lowercase();
    (buf, text.len())
}

/// Reads one statement (top-level or inner) up to its effects.
pub(super) fn unit(r: &mut Reader, ctx: Ctx) -> Kind {
    let sql = r.sql;
    let mut parens = false;
    while r.eat_symbol(b"(") {
        parens = true;
    }
    let Some(t) = r.peek(0) else {
        return if parens { Kind::Other } else { Kind::Empty };
    };
    let (buf, len) = verb(sql, &t);
    let v = &buf[..len];
    if ctx == Ctx::Top && !parens {
        let compound = match v {
            b"begin" => r.peek_word(1, b"not") && r.peek_word(2, b"atomic"),
            b"if" | b"case" | b"loop" | b"while" | b"repeat" | b"for" => true,
            _ => false,
        };
        if compound {
            r.enter_body(Body::compound());
            r.conditional = true;
            return Kind::Compound;
        }
    }
    if len == 0 {
        return Kind::Other;
    }
    r.next();
    match v {
        b"select" => Kind::Select,
        b"insert" => Kind::Insert,
        b"update" => Kind::Update,
        b"delete" => Kind::Delete,
        b"replace" => Kind::Replace,
        b"do" => Kind::Do,
        b"show" => Kind::Show,
        b"truncate" => Kind::Truncate,
        b"with" => Kind::With,
        b"values" => Kind::Values,
        b"table" => Kind::Table,
        b"commit" => Kind::Commit,
        b"rollback" => Kind::Rollback,
        b"savepoint" => Kind::Savepoint,
        b"begin" => Kind::Begin,
        b"start" if r.peek_word(0, b"transaction") => Kind::Begin,
        b"release" if r.peek_word(0, b"savepoint") => Kind::ReleaseSavepoint,
        b"xa" => {
            r.emit(Effect::Xa);
            Kind::Xa
        }
        b"set" => {
            set(r, ctx);
            Kind::Set
        }
        b"call" => {
            call(r);
            Kind::Call
        }
        b"use" => {
            if let Some(schema) = r.peek(0).and_then(|t| r.name(&t)) {
                r.emit(Effect::Use { schema });
            }
            Kind::Use
        }
        b"kill" => {
            kill(r);
            Kind::Kill
        }
        b"lock" => lock(r, false),
        b"unlock" => lock(r, true),
        b"flush" => {
            flush(r);
            Kind::Flush
        }
        b"handler" => {
            handler(r);
            Kind::Handler
        }
        b"prepare" => {
            if let Some(name) = r.peek(0).and_then(|t| r.name(&t)) {
                r.next();
                r.emit(Effect::TextPrepare { name: lower(name) });
                if r.eat_word(b"from") {
                    dynamic_sql(r);
                }
            }
            Kind::Prepare
        }
        b"execute" => {
            if r.eat_word(b"immediate") {
                r.emit(Effect::ExecuteImmediate);
                dynamic_sql(r);
                return Kind::ExecuteImmediate;
            }
            if let Some(name) = r.peek(0).and_then(|t| r.name(&t)) {
                r.emit(Effect::ExecutePrepared { name: lower(name) });
            }
            Kind::Execute
        }
        b"deallocate" => {
            r.eat_word(b"prepare");
            deallocate(r);
            Kind::Deallocate
        }
        b"create" => create(r, ctx),
        b"drop" => drop(r),
        b"alter" => alter(r, ctx),
        b"rename" => {
            rename(r);
            Kind::Rename
        }
        b"load" if r.peek_any(0, &[b"data", b"xml"]) => {
            load_data(r);
            Kind::LoadData
        }
        b"backup" => {
            backup(r);
            Kind::Backup
        }
        b"get" => {
            if r.peek_any(0, &[b"current", b"stacked"]) && r.peek_word(1, b"diagnostics") {
                r.next();
            }
            if !r.eat_word(b"diagnostics") {
                return Kind::Other;
            }
            get_diagnostics(r);
            Kind::GetDiagnostics
        }
        b"explain" | b"describe" | b"desc" => {
            // The explained statement is read as if it ran: MariaDB runs
            // parts of it while explaining (a derived table is
            // materialised, a constant subquery evaluated), so `EXPLAIN
            // SELECT * FROM (SELECT GET_LOCK('l', 0)) d` takes the lock,
            // and a NEXTVAL, an `@x :=` or a stored function there runs
            // too. (MySQL's EXPLAIN ANALYZE runs all of it.) Only those
            // parts run, so what would end state (RELEASE_LOCK, `@x :=
            // NULL`, RELEASE_ALL_LOCKS in a select list) is not trusted.
            r.conditional = true;
            Kind::Other
        }
        b"declare" if ctx == Ctx::Compound => {
            declare(r);
            Kind::Other
        }
        b"for" if ctx == Ctx::Compound => {
            if let Some(name) = r.peek(0).and_then(|t| r.name(&t)) {
                add_local(r, name);
            }
            Kind::Other
        }
        _ => Kind::Other,
    }
}

/// `CALL name[(args)]`: bare user-variable arguments may be OUT/INOUT.
fn call(r: &mut Reader) {
    let sql = r.sql;
    r.emit(Effect::Call);
    r.table_name();
    if !r.eat_symbol(b"(") {
        return;
    }
    let d = r.depth;
    let mut arg_start = true;
    while let Some(t) = r.next() {
        if r.depth < d {
            break;
        }
        if r.depth == d
            && arg_start
            && t.kind == TokenKind::UserVar
            && (r.peek_symbol(0, b",") || r.peek_symbol(0, b")"))
        {
            let name = lower(r.value(&t).into_owned());
            r.emit(Effect::UserVarAssign { name, null: false });
        }
        arg_start = r.depth == d && t.is_symbol(sql, b",");
    }
}

/// `KILL [HARD|SOFT] [CONNECTION|QUERY [ID]] n | … USER name`.
fn kill(r: &mut Reader) {
    let sql = r.sql;
    if !r.eat_word(b"hard") {
        r.eat_word(b"soft");
    }
    let mut query = false;
    let mut by_query_id = false;
    if !r.eat_word(b"connection") && r.eat_word(b"query") {
        query = true;
        by_query_id = r.eat_word(b"id");
    }
    // `KILL QUERY ID USER …` reads USER as an expression (the server says
    // unknown column).
    let id_kind = if !by_query_id && r.eat_word(b"user") {
        KillTarget::User
    } else {
        let literal = match (r.peek(0), r.peek(1)) {
            (Some(t), None) if t.kind == TokenKind::Number => std::str::from_utf8(t.text(sql))
                .ok()
                .and_then(|s| s.parse::<u64>().ok()),
            _ => None,
        };
        match literal {
            Some(n) if by_query_id => KillTarget::QueryId(n),
            Some(n) => KillTarget::Id(n),
            None if by_query_id => KillTarget::QueryIdExpression,
            None => KillTarget::Expression,
        }
    };
    r.emit(Effect::Kill { query, id_kind });
}

/// LOCK/UNLOCK TABLES and MySQL's LOCK/UNLOCK INSTANCE (a backup lock).
fn lock(r: &mut Reader, unlock: bool) -> Kind {
    if r.peek_any(0, &[b"table", b"tables"]) {
        if unlock {
            r.emit(Effect::UnlockTables);
            return Kind::UnlockTables;
        }
        r.emit(Effect::LockTables);
        return Kind::LockTables;
    }
    if r.peek_word(0, b"instance") {
        r.emit(Effect::BackupLock { unlock });
    }
    Kind::Other
}

/// FLUSH …: the forms that leave a read lock.
fn flush(r: &mut Reader) {
    while let Some(t) = r.next() {
        let sql = r.sql;
        if (t.is_word(sql, b"with") && r.peek_word(0, b"read") && r.peek_word(1, b"lock"))
            || (t.is_word(sql, b"for") && r.peek_word(0, b"export"))
        {
            r.emit(Effect::FlushReadLock);
            return;
        }
    }
}

/// `HANDLER t OPEN [[AS] alias]` / `HANDLER alias CLOSE`.
fn handler(r: &mut Reader) {
    let Some((_, table)) = r.table_name() else {
        return;
    };
    if r.eat_word(b"open") {
        r.eat_word(b"as");
        let alias = r.peek(0).and_then(|t| r.name(&t)).unwrap_or(table);
        r.emit(Effect::HandlerOpen { alias });
    } else if r.eat_word(b"close") {
        r.emit(Effect::HandlerClose { alias: table });
    }
}

/// A string literal (optionally with a charset introducer) that is the
/// whole statement text of PREPARE / EXECUTE IMMEDIATE.
fn dynamic_sql(r: &mut Reader) {
    let sql = r.sql;
    let mut k = 0;
    if let Some(t) = r
        .peek(0)
        .filter(|t| t.kind == TokenKind::Word && t.text(sql).first() == Some(&b'_'))
    {
        // The server converts the text from the introducer's character set
        // before it reads it: only those that keep every quote and
        // backslash where the bytes have them are read here (`_gbk`,
        // `_sjis`, `_utf16` … leave it opaque).
        const SAME_READING: [&[u8]; 6] = [
            b"_utf8",
            b"_utf8mb3",
            b"_utf8mb4",
            b"_latin1",
            b"_ascii",
            b"_binary",
        ];
        if !SAME_READING
            .iter()
            .any(|c| t.text(sql).eq_ignore_ascii_case(c))
        {
            return;
        }
        k = 1;
    }
    let Some(lit) = r.peek(k).filter(|t| t.kind == TokenKind::String) else {
        return;
    };
    if r.peek(k + 1).is_none() || r.peek_word(k + 1, b"using") {
        let text = r.value(&lit).into_owned();
        r.emit(Effect::DynamicSql { text });
    }
}

pub(super) fn deallocate(r: &mut Reader) {
    if let Some(name) = r.peek(0).and_then(|t| r.name(&t)) {
        r.emit(Effect::Deallocate { name: lower(name) });
    }
}

/// `LOAD DATA|XML …`: user variables in the column list are assigned.
fn load_data(r: &mut Reader) {
    let sql = r.sql;
    let base = r.depth;
    let mut in_list = false;
    let mut prev: Option<Token> = None;
    while let Some(t) = r.next() {
        let after_character = prev.is_some_and(|p| p.is_word(sql, b"character"));
        if r.depth == base && t.is_word(sql, b"set") && !after_character {
            return;
        }
        if t.is_symbol(sql, b"(") && r.depth == base + 1 {
            in_list = !prev.is_some_and(|p| p.is_word(sql, b"partition"));
        }
        if in_list && r.depth == base + 1 && t.kind == TokenKind::UserVar {
            let name = lower(r.value(&t).into_owned());
            r.emit(Effect::UserVarAssign { name, null: false });
        }
        prev = Some(t);
    }
}

/// `BACKUP STAGE x | LOCK t | UNLOCK`.
fn backup(r: &mut Reader) {
    if r.eat_word(b"stage") {
        let end = r.peek_word(0, b"end");
        r.emit(Effect::BackupStage { end });
    } else if r.eat_word(b"lock") {
        r.emit(Effect::BackupLock { unlock: false });
    } else if r.eat_word(b"unlock") {
        r.emit(Effect::BackupLock { unlock: true });
    }
}

/// `GET … DIAGNOSTICS` targets: `@x = item`.
fn get_diagnostics(r: &mut Reader) {
    while let Some(t) = r.next() {
        if t.kind == TokenKind::UserVar && r.peek_symbol(0, b"=") {
            let name = lower(r.value(&t).into_owned());
            r.emit(Effect::UserVarAssign { name, null: false });
        }
    }
}

/// `DECLARE a, b type …` in a compound statement: remember the variables.
fn declare(r: &mut Reader) {
    if r.peek_any(0, &[b"continue", b"exit", b"undo"]) {
        return;
    }
    let mut names = Vec::new();
    while let Some(name) = r.peek(0).and_then(|t| r.name(&t)) {
        r.next();
        names.push(name);
        if !r.eat_symbol(b",") {
            break;
        }
    }
    if r.peek_any(0, &[b"condition", b"cursor"]) {
        return;
    }
    for name in names {
        add_local(r, name);
    }
}

fn add_local(r: &mut Reader, name: Vec<u8>) {
    if let Some(body) = r.body.as_mut() {
        body.locals.push(lower(name));
    }
}
