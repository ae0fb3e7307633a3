//! SET statements: user- and system-variable assignments with their scope,
//! SET NAMES, SET TRANSACTION, SET STATEMENT … FOR and the rest.
//!
//! Owns the SET grammar as far as the effects need it; the value
//! expressions themselves are skipped (and observed by `observe`).

use super::effects::{Effect, Kind, Scope};
use super::lexer::{Token, TokenKind};
use super::reader::{Reader, lower};
use super::statement::{Ctx, unit};

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
pub(super) fn set(r: &mut Reader, ctx: Ctx) {
    let sql = r.sql;
    if r.eat_word(b"statement") {
        if ctx == Ctx::Inner {
            // SET STATEMENT … FOR SET STATEMENT …: the server rejects it, and
            // following it would nest without bound.
            r.emit(Effect::SetStatement { vars: None });
            r.incomplete = true;
            return;
        }
        let (vars, has_for) = statement_vars(r);
        r.emit(Effect::SetStatement { vars });
        if has_for && unit(r, Ctx::Inner) == Kind::Call {
            // A procedure's body is as unseen here as anywhere.
            r.emit(Effect::StoredFunction);
        }
        return;
    }
    let first = scope_keyword(sql, r.peek(0));
    if r.eat_word(b"transaction") {
        r.emit(Effect::SetTransaction {
            scope: Scope::Default,
        });
        return;
    }
    if let Some(scope) = first
        && r.peek_word(1, b"transaction")
    {
        r.next();
        r.next();
        r.emit(Effect::SetTransaction { scope });
        return;
    }
    if r.peek_word(0, b"role") {
        r.emit(Effect::SetRole);
        return;
    }
    if r.peek_word(0, b"default") && r.peek_word(1, b"role") {
        r.emit(Effect::SetDefaultRole);
        return;
    }
    if r.peek_word(0, b"password") {
        r.emit(Effect::SetOther);
        return;
    }
    let mut sticky = Scope::Default;
    loop {
        // A scope keyword followed by a name (not `session.x`, not `= …`).
        if let Some(scope) = scope_keyword(sql, r.peek(0))
            && r.peek(1)
                .is_some_and(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
        {
            r.next();
            sticky = scope;
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

/// Reads `name = value [, …] FOR` of `SET STATEMENT`, up to and including
/// the `FOR` at the statement's depth: the names (lowercase) set for the
/// statement's time, `None` when the list is not of that shape (still read
/// up to the `FOR`). False as the second value when no `FOR` came.
fn statement_vars(r: &mut Reader) -> (Option<Vec<Vec<u8>>>, bool) {
    let sql = r.sql;
    let base = r.depth;
    let mut vars = Some(Vec::new());
    // Expecting a name (start of an element) or inside a value.
    let mut at_name = true;
    loop {
        let Some(t) = r.next() else {
            return (vars, false);
        };
        if r.depth == base && t.is_word(sql, b"for") && !at_name {
            return (vars, true);
        }
        if at_name {
            let name = match t.kind {
                TokenKind::Word | TokenKind::QuotedIdent => r.name(&t),
                TokenKind::SysVar => match sysvar_spaced(r, &t) {
                    (Scope::Global, _) => None,
                    (_, name) => Some(name),
                },
                _ => None,
            };
            match (name, r.eat_symbol(b"=") || r.eat_symbol(b":=")) {
                (Some(n), true) => {
                    if let Some(v) = vars.as_mut() {
                        v.push(lower(n));
                    }
                }
                _ => vars = None,
            }
            at_name = false;
        } else if r.depth == base && t.is_symbol(sql, b",") {
            at_name = true;
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
            r.emit(Effect::SetNames {
                names: t.is_word(sql, b"names"),
            });
            // The character set's name: after NAMES / CHARSET, or after
            // CHARACTER SET.
            let at = if t.is_word(sql, b"character") { 2 } else { 1 };
            if !reads_alike(r, at) {
                r.emit(Effect::Relexes);
            }
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
            let (scope, name) = sysvar_spaced(r, &t);
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
                if relexing(&name) {
                    // A local of that name may be out of scope by now (the
                    // reader does not end a name's scope with its block):
                    // then the session's variable is set.
                    r.emit(Effect::Relexes);
                }
                r.skip_to_comma();
                return true;
            }
            assignment(r, name, sticky)
        }
        _ => false,
    }
}

/// The session variables whose value changes how the server lexes.
pub(super) fn relexing(name: &[u8]) -> bool {
    matches!(name, b"sql_mode" | b"character_set_client")
}

/// True when the token `at` ahead names, plainly, a character set read
/// alike (not DEFAULT, a variable or an expression, nor one
/// [`super::lexer::read_otherwise`]).
fn reads_alike(r: &mut Reader, at: usize) -> bool {
    let Some(t) = r.peek(at) else { return false };
    let plain = matches!(
        t.kind,
        TokenKind::Word | TokenKind::String | TokenKind::QuotedIdent
    );
    let name = lower(r.value(&t).into_owned());
    let sql = r.sql;
    let ends = r
        .peek(at + 1)
        .is_none_or(|n| n.is_symbol(sql, b",") || n.is_word(sql, b"collate"));
    plain
        && ends
        && !name.is_empty()
        && name.as_slice() != b"default"
        && !super::lexer::read_otherwise(&name)
}

/// `= value` of a system-variable assignment.
fn assignment(r: &mut Reader, name: Vec<u8>, scope: Scope) -> bool {
    if !(r.eat_symbol(b"=") || r.eat_symbol(b":=")) {
        return false;
    }
    if scope != Scope::Global
        && relexing(&name)
        && (name.as_slice() == b"sql_mode" || !reads_alike(r, 0))
    {
        r.emit(Effect::Relexes);
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

/// Scope and lowercase name of an `@@[scope.]name[.name]` token and the
/// `. name` parts after it: the server
/// reads `@@session . sql_mode` (spaces or comments around the dot) as
/// `@@session.sql_mode`.
fn sysvar_spaced(r: &mut Reader, t: &Token) -> (Scope, Vec<u8>) {
    let mut parts = sysvar_parts(r, t);
    while r.peek_symbol(0, b".") {
        let Some(part) = r.peek(1).and_then(|p| r.name(&p)) else {
            break;
        };
        r.next();
        r.next();
        parts.push(lower(part));
    }
    scoped(parts)
}

/// The scope a variable's dotted parts name, and the rest joined.
fn scoped(parts: Vec<Vec<u8>>) -> (Scope, Vec<u8>) {
    let scope = match parts.first().map(Vec::as_slice) {
        Some(b"global" | b"persist" | b"persist_only") if parts.len() > 1 => Scope::Global,
        Some(b"session" | b"local") if parts.len() > 1 => Scope::Session,
        _ => Scope::Unscoped,
    };
    let skip = usize::from(scope != Scope::Unscoped);
    (scope, parts[skip.min(parts.len())..].join(&b'.'))
}

/// The lowercase dotted parts of an `@@[scope.]name[.name]` token.
fn sysvar_parts(r: &Reader, t: &Token) -> Vec<Vec<u8>> {
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
    parts
}
