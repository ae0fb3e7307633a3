//! The leading verb of a statement and the effects read from its structure
//! (SET lists, DROP/RENAME lists, KILL, HANDLER, PREPARE, …).
//!
//! Owns statement-level grammar only, and only as much of it as the effects
//! need; expression-level patterns are in `observe`. Each parser consumes
//! tokens of the current (inner) statement from the `Reader`; whatever it
//! leaves is drained (and observed) by the caller.

use super::blocks::{Body, Header};
use super::effects::{Effect, KillTarget, Kind, Scope};
use super::lexer::{Token, TokenKind};
use super::reader::{Reader, lower};

/// Where a statement stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
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
fn unit(r: &mut Reader, ctx: Ctx) -> Kind {
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
                r.emit(Effect::TextPrepare { name: lower(name) });
            }
            Kind::Prepare
        }
        b"execute" => {
            if r.eat_word(b"immediate") {
                r.emit(Effect::ExecuteImmediate);
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
            // EXPLAIN does not run the statement (MySQL's EXPLAIN ANALYZE does).
            if !r.peek_word(0, b"analyze") {
                r.observe = false;
            }
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

fn scope_keyword(sql: &[u8], t: Option<Token>) -> Option<Scope> {
    let t = t?;
    if t.is_word(sql, b"global") || t.is_word(sql, b"persist") || t.is_word(sql, b"persist_only") {
        Some(Scope::Global)
    } else if t.is_word(sql, b"session") || t.is_word(sql, b"local") {
        Some(Scope::Session)
    } else {
        None
    }
}

/// `SET …` after the SET.
fn set(r: &mut Reader, ctx: Ctx) {
    let sql = r.sql;
    if r.eat_word(b"statement") {
        r.emit(Effect::SetStatement);
        let base = r.depth;
        loop {
            let Some(t) = r.next() else { return };
            if r.depth == base && t.is_word(sql, b"for") {
                break;
            }
        }
        unit(r, Ctx::Inner);
        return;
    }
    let first = scope_keyword(sql, r.peek(0));
    if r.eat_word(b"transaction") {
        r.emit(Effect::SetTransaction {
            scope: Scope::Default,
        });
        return;
    }
    if let Some(scope) = first {
        if r.peek_word(1, b"transaction") {
            r.next();
            r.next();
            r.emit(Effect::SetTransaction { scope });
            return;
        }
    }
    if r.peek_any(0, &[b"password", b"role"])
        || (r.peek_word(0, b"default") && r.peek_word(1, b"role"))
    {
        r.emit(Effect::SetOther);
        return;
    }
    let mut sticky = Scope::Default;
    loop {
        if let Some(scope) = scope_keyword(sql, r.peek(0)) {
            if r.peek(1)
                .is_some_and(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
                && !r.peek_symbol(1, b".")
            {
                r.next();
                sticky = scope;
            }
        }
        if !set_element(r, ctx, sticky) {
            r.emit(Effect::SetOther);
            return;
        }
        if !r.eat_symbol(b",") {
            return;
        }
    }
}

/// One element of a SET list; false when it is not understood.
fn set_element(r: &mut Reader, ctx: Ctx, sticky: Scope) -> bool {
    let sql = r.sql;
    let Some(t) = r.peek(0) else { return false };
    match t.kind {
        TokenKind::Word
            if t.is_word(sql, b"names")
                || t.is_word(sql, b"charset")
                || (t.is_word(sql, b"character") && r.peek_word(1, b"set")) =>
        {
            r.emit(Effect::SetNames);
            r.skip_to_comma();
            true
        }
        TokenKind::UserVar => {
            r.next();
            if r.eat_symbol(b"=") {
                let null = r.value_is_null(0);
                let name = lower(r.value(&t).into_owned());
                r.emit(Effect::UserVarAssign { name, null });
            } else if !r.peek_symbol(0, b":=") {
                return false;
            }
            r.skip_to_comma();
            true
        }
        TokenKind::SysVar => {
            r.next();
            let (scope, name) = sysvar(r, &t);
            assignment(r, name, scope)
        }
        TokenKind::Word | TokenKind::QuotedIdent => {
            r.next();
            let mut name = r.value(&t).into_owned();
            while r.peek_symbol(0, b".") {
                let Some(part) = r.peek(1).and_then(|p| r.name(&p)) else {
                    break;
                };
                r.next();
                r.next();
                name.push(b'.');
                name.extend_from_slice(&part);
            }
            let name = lower(name);
            if ctx == Ctx::Compound && sticky == Scope::Default && r.is_local(&name) {
                if !(r.eat_symbol(b"=") || r.eat_symbol(b":=")) {
                    return false;
                }
                r.skip_to_comma();
                return true;
            }
            assignment(r, name, sticky)
        }
        _ => false,
    }
}

/// `= value` of a system-variable assignment.
fn assignment(r: &mut Reader, name: Vec<u8>, scope: Scope) -> bool {
    if !(r.eat_symbol(b"=") || r.eat_symbol(b":=")) {
        return false;
    }
    let to_default = r.peek_word(0, b"default") && (r.peek(1).is_none() || r.peek_symbol(1, b","));
    r.emit(Effect::SetVariable {
        name,
        scope,
        to_default,
    });
    r.skip_to_comma();
    true
}

/// Scope and lowercase name of an `@@[scope.]name[.name]` token.
fn sysvar(r: &Reader, t: &Token) -> (Scope, Vec<u8>) {
    let text = &t.text(r.sql)[2..];
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let mut part = Vec::new();
        if text[i] == b'`' {
            i += 1;
            while i < text.len() {
                if text[i] == b'`' {
                    if text.get(i + 1) == Some(&b'`') {
                        part.push(b'`');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                part.push(text[i]);
                i += 1;
            }
        } else {
            while i < text.len() && text[i] != b'.' {
                part.push(text[i]);
                i += 1;
            }
        }
        parts.push(lower(part));
        if text.get(i) == Some(&b'.') {
            i += 1;
        }
    }
    let scope = match parts.first().map(Vec::as_slice) {
        Some(b"global" | b"persist" | b"persist_only") if parts.len() > 1 => Scope::Global,
        Some(b"session" | b"local") if parts.len() > 1 => Scope::Session,
        _ => Scope::Default,
    };
    let skip = usize::from(scope != Scope::Default);
    (scope, parts[skip.min(parts.len())..].join(&b'.'))
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
    let id_kind = if r.eat_word(b"user") {
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

fn deallocate(r: &mut Reader) {
    if let Some(name) = r.peek(0).and_then(|t| r.name(&t)) {
        r.emit(Effect::Deallocate { name: lower(name) });
    }
}

/// `DROP …` after the DROP.
fn drop(r: &mut Reader) -> Kind {
    let temporary = r.eat_word(b"temporary");
    if !temporary && r.eat_word(b"prepare") {
        deallocate(r);
        return Kind::Deallocate;
    }
    if !(r.eat_word(b"table") || r.eat_word(b"tables") || r.eat_word(b"sequence")) {
        return Kind::Drop;
    }
    if r.peek_word(0, b"if") && r.peek_word(1, b"exists") {
        r.next();
        r.next();
    }
    let mut tables = Vec::new();
    while let Some(name) = r.table_name() {
        tables.push(name);
        if !r.eat_symbol(b",") {
            break;
        }
    }
    if !tables.is_empty() {
        r.emit(Effect::TableDrop { temporary, tables });
    }
    Kind::Drop
}

/// Skips `DEFINER = user`, `SQL SECURITY x`, `ALGORITHM = x` and
/// `AGGREGATE` before the object type of a CREATE or ALTER.
fn skip_object_prefix(r: &mut Reader) {
    let sql = r.sql;
    loop {
        if r.eat_word(b"definer") {
            r.eat_symbol(b"=");
            let Some(user) = r.next() else { return };
            if (user.is_word(sql, b"current_user") || user.is_word(sql, b"current_role"))
                && r.eat_symbol(b"(")
            {
                r.eat_symbol(b")");
            }
            if r.peek(0).is_some_and(|t| t.kind == TokenKind::UserVar) {
                r.next();
            }
        } else if r.peek_word(0, b"sql") && r.peek_word(1, b"security") {
            r.next();
            r.next();
            r.next();
        } else if r.eat_word(b"algorithm") {
            r.eat_symbol(b"=");
            r.next();
        } else if !r.eat_word(b"aggregate") {
            return;
        }
    }
}

/// `CREATE …` after the CREATE.
fn create(r: &mut Reader, ctx: Ctx) -> Kind {
    if r.peek_word(0, b"or") && r.peek_word(1, b"replace") {
        r.next();
        r.next();
    }
    skip_object_prefix(r);
    let header = if r.peek_any(0, &[b"procedure", b"function"]) {
        Some(Header::Routine { params_seen: false })
    } else if r.peek_word(0, b"trigger") {
        Some(Header::Trigger)
    } else if r.peek_word(0, b"event") {
        Some(Header::Event)
    } else if r.peek_word(0, b"package") {
        Some(Header::Package)
    } else {
        None
    };
    if let Some(header) = header {
        r.next();
        routine(r, ctx, header);
        return Kind::RoutineDefinition;
    }
    if r.peek_word(0, b"view") {
        r.observe = false;
        return Kind::Create;
    }
    if r.eat_word(b"temporary") && (r.eat_word(b"table") || r.eat_word(b"sequence")) {
        if r.peek_word(0, b"if") && r.peek_word(1, b"not") && r.peek_word(2, b"exists") {
            r.next();
            r.next();
            r.next();
        }
        if let Some((schema, name)) = r.table_name() {
            r.emit(Effect::TempTableCreate { schema, name });
        }
    }
    Kind::Create
}

/// A stored body follows: track its blocks, report nothing.
fn routine(r: &mut Reader, ctx: Ctx, header: Header) {
    r.observe = false;
    if ctx == Ctx::Top {
        r.enter_body(Body::routine(header));
    }
}

/// `ALTER …` after the ALTER.
fn alter(r: &mut Reader, ctx: Ctx) -> Kind {
    let sql = r.sql;
    skip_object_prefix(r);
    if r.eat_word(b"event") {
        routine(r, ctx, Header::Event);
        return Kind::RoutineDefinition;
    }
    if r.peek_word(0, b"view") {
        r.observe = false;
        return Kind::Alter;
    }
    r.eat_word(b"online");
    r.eat_word(b"ignore");
    if !r.eat_word(b"table") {
        return Kind::Alter;
    }
    if r.peek_word(0, b"if") && r.peek_word(1, b"exists") {
        r.next();
        r.next();
    }
    let Some(mut from) = r.table_name() else {
        return Kind::Alter;
    };
    let base = r.depth;
    while let Some(t) = r.next() {
        if r.depth == base
            && t.is_word(sql, b"rename")
            && !r.peek_any(0, &[b"column", b"index", b"key"])
        {
            if !r.eat_word(b"to") {
                r.eat_word(b"as");
            }
            let Some(to) = r.table_name() else { break };
            r.emit(Effect::TableRename {
                from: from.clone(),
                to: to.clone(),
            });
            from = to;
        }
    }
    Kind::Alter
}

/// `RENAME TABLE[S] [IF EXISTS] a [WAIT n|NOWAIT] TO b, …`.
fn rename(r: &mut Reader) {
    if !(r.eat_word(b"table") || r.eat_word(b"tables")) {
        return;
    }
    if r.peek_word(0, b"if") && r.peek_word(1, b"exists") {
        r.next();
        r.next();
    }
    loop {
        let Some(from) = r.table_name() else { return };
        if r.eat_word(b"wait") {
            r.next();
        } else {
            r.eat_word(b"nowait");
        }
        if !r.eat_word(b"to") {
            return;
        }
        let Some(to) = r.table_name() else { return };
        r.emit(Effect::TableRename { from, to });
        if !r.eat_symbol(b",") {
            return;
        }
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
