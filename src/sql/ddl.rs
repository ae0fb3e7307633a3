//! DDL statements as far as session state goes: temporary tables created,
//! tables dropped and renamed, and routine, trigger, event and view
//! definitions whose bodies are stored, not run.
//!
//! Owns CREATE/ALTER/DROP/RENAME prefixes only; everything after them is
//! drained (and, unless the body is stored, observed) by the caller.

use super::blocks::{Body, Header};
use super::effects::{Effect, Kind};
use super::lexer::TokenKind;
use super::reader::Reader;
use super::statement::{Ctx, deallocate};

/// `DROP …` after the DROP.
pub(super) fn drop(r: &mut Reader) -> Kind {
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
pub(super) fn create(r: &mut Reader, ctx: Ctx) -> Kind {
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
pub(super) fn alter(r: &mut Reader, ctx: Ctx) -> Kind {
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
pub(super) fn rename(r: &mut Reader) {
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
