//! The `?` placeholders of a prepared KILL (`PREPARE s FROM 'KILL ?'`, or
//! COM_STMT_PREPARE of `KILL QUERY ?`) and the values bound to them: the
//! USING list of a text `EXECUTE`, or the parameter values of a
//! COM_STMT_EXECUTE. Each value becomes a SQL expression put in place of its
//! placeholder, so that the KILL's expression is computed as the server
//! computes it (a string `'12'` is thread 12, a hex string too).

use crate::sql::lexer::{LexOptions, Lexer, Token};

/// ER_WRONG_ARGUMENTS as the server words it for a text EXECUTE.
pub const WRONG_ARGUMENTS_EXECUTE: &str = "Incorrect arguments to EXECUTE";
/// ER_WRONG_ARGUMENTS as the server words it for COM_STMT_EXECUTE.
pub const WRONG_ARGUMENTS_STMT: &str = "Incorrect arguments to mysqld_stmt_execute";

/// How many `?` placeholders `expr` holds (outside strings and comments).
pub fn placeholders(expr: &str, opts: LexOptions) -> usize {
    let sql = expr.as_bytes();
    Lexer::new(sql, opts)
        .filter(|t| t.is_symbol(sql, b"?"))
        .count()
}

/// `expr` with its placeholders replaced, in order, by `args` (each in
/// parentheses); `None` when the counts differ.
pub fn bind(expr: &str, args: &[String], opts: LexOptions) -> Option<String> {
    let sql = expr.as_bytes();
    let marks: Vec<Token> = Lexer::new(sql, opts)
        .filter(|t| t.is_symbol(sql, b"?"))
        .collect();
    if marks.len() != args.len() {
        return None;
    }
    let mut out =
        String::with_capacity(expr.len() + args.iter().map(|a| a.len() + 2).sum::<usize>());
    let mut at = 0;
    for (t, a) in marks.iter().zip(args) {
        out.push_str(expr.get(at..t.start)?);
        out.push('(');
        out.push_str(a);
        out.push(')');
        at = t.end;
    }
    out.push_str(expr.get(at..)?);
    Some(out)
}

/// The expressions of a text `EXECUTE name [USING a, b, …]` (`toks` are the
/// statement's tokens): none without USING; `None` when one may change the
/// session or has no value fixed by the time it is read twice (only
/// literals, user variables and the expressions `pure` accepts; see
/// `kill_dynamic`).
pub fn using_args(
    sql: &[u8],
    toks: &[Token],
    pure: impl Fn(&[u8], &[Token], usize) -> Option<String>,
) -> Option<Vec<String>> {
    let Some(using) = toks.iter().position(|t| t.is_word(sql, b"using")) else {
        return Some(Vec::new());
    };
    // The whole list must be pure; then it is cut at its top-level commas.
    pure(sql, toks, using + 1)?;
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut first = using + 1;
    for (i, t) in toks.iter().enumerate().skip(using + 1) {
        if depth == 0 && t.is_word(sql, b"using") {
            // `pure` stopped there: what follows was not checked.
            return None;
        }
        let end_here = t.is_symbol(sql, b";");
        if t.is_symbol(sql, b"(") {
            depth += 1;
        } else if t.is_symbol(sql, b")") {
            depth = depth.saturating_sub(1);
        }
        if depth == 0 && (t.is_symbol(sql, b",") || end_here) {
            args.push(text(sql, toks, first, i)?);
            first = i + 1;
            if end_here {
                return Some(args);
            }
        }
    }
    args.push(text(sql, toks, first, toks.len())?);
    Some(args)
}

/// The text from token `from` up to (not including) token `to`.
fn text(sql: &[u8], toks: &[Token], from: usize, to: usize) -> Option<String> {
    let (a, b) = (toks.get(from)?, toks.get(to.checked_sub(1)?)?);
    (from < to)
        .then(|| std::str::from_utf8(sql.get(a.start..b.end)?).ok())
        .flatten()
        .map(str::to_string)
}

/// Why binary parameter values cannot be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadParams {
    /// Types were never sent, a value is cut off, or a type is not one a
    /// thread id can be read from (dates, times, geometry).
    Wrong,
}

/// The values of a COM_STMT_EXECUTE for a statement with `n` (> 0)
/// placeholders, as SQL expressions, and the type block in force (sent now,
/// or `remembered` from an earlier execute, which is what the server uses
/// when the client sends none).
pub fn binary_args(
    payload: &[u8],
    n: usize,
    remembered: Option<&[u8]>,
) -> Result<(Vec<String>, Vec<u8>), BadParams> {
    let null_at = 10;
    let bitmap = payload
        .get(null_at..null_at + n.div_ceil(8))
        .ok_or(BadParams::Wrong)?;
    let bound_at = null_at + n.div_ceil(8);
    let bound = *payload.get(bound_at).ok_or(BadParams::Wrong)?;
    let (types, mut at) = if bound == 1 {
        let t = payload
            .get(bound_at + 1..bound_at + 1 + 2 * n)
            .ok_or(BadParams::Wrong)?;
        (t.to_vec(), bound_at + 1 + 2 * n)
    } else {
        (remembered.ok_or(BadParams::Wrong)?.to_vec(), bound_at + 1)
    };
    if types.len() != 2 * n {
        return Err(BadParams::Wrong);
    }
    let mut args = Vec::with_capacity(n);
    for i in 0..n {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            args.push("NULL".to_string());
            continue;
        }
        let (ty, unsigned) = (types[2 * i], types[2 * i + 1] & 0x80 != 0);
        let (arg, used) = value(payload.get(at..).ok_or(BadParams::Wrong)?, ty, unsigned)?;
        args.push(arg);
        at += used;
    }
    Ok((args, types))
}

/// One binary value of type `ty` at the start of `v`: its SQL expression
/// and how many bytes it took.
fn value(v: &[u8], ty: u8, unsigned: bool) -> Result<(String, usize), BadParams> {
    let fixed = |len: usize| v.get(..len).ok_or(BadParams::Wrong);
    let int = |len: usize| -> Result<(String, usize), BadParams> {
        let b = fixed(len)?;
        let mut raw = [0u8; 8];
        raw[..len].copy_from_slice(b);
        let u = u64::from_le_bytes(raw);
        let text = if unsigned {
            u.to_string()
        } else {
            // Sign-extend from `len` bytes.
            let shift = 64 - 8 * len as u32;
            (((u << shift) as i64) >> shift).to_string()
        };
        Ok((text, len))
    };
    match ty {
        1 => int(1),      // TINY
        2 | 13 => int(2), // SHORT, YEAR
        3 | 9 => int(4),  // LONG, INT24
        8 => int(8),      // LONGLONG
        4 => {
            let b = fixed(4)?;
            let f = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            Ok((float(f64::from(f))?, 4))
        }
        5 => {
            let b = fixed(8)?;
            let mut raw = [0u8; 8];
            raw.copy_from_slice(b);
            Ok((float(f64::from_le_bytes(raw))?, 8))
        }
        6 => Ok(("NULL".into(), 0)),
        // DECIMAL, VARCHAR, BIT, NEWDECIMAL, ENUM, SET, blobs, strings:
        // length-encoded bytes, read as a binary string.
        0 | 15 | 16 | 246..=254 => {
            let (len, head) = lenenc(v).ok_or(BadParams::Wrong)?;
            let len = usize::try_from(len).map_err(|_| BadParams::Wrong)?;
            let end = head.checked_add(len).ok_or(BadParams::Wrong)?;
            let bytes = v.get(head..end).ok_or(BadParams::Wrong)?;
            let mut s = Vec::with_capacity(11 + 2 * len);
            s.extend_from_slice(b"_binary X'");
            crate::sql::push_hex_upper(&mut s, bytes);
            s.push(b'\'');
            let s = String::from_utf8(s).map_err(|_| BadParams::Wrong)?;
            Ok((s, end))
        }
        _ => Err(BadParams::Wrong),
    }
}

/// A float as a SQL literal (finite only).
fn float(f: f64) -> Result<String, BadParams> {
    if f.is_finite() {
        Ok(format!("{f:e}"))
    } else {
        Err(BadParams::Wrong)
    }
}

/// A length-encoded integer: its value and its size in bytes.
fn lenenc(v: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| -> Option<u64> {
        let b = v.get(1..1 + n)?;
        let mut raw = [0u8; 8];
        raw[..n].copy_from_slice(b);
        Some(u64::from_le_bytes(raw))
    };
    match *v.first()? {
        b @ 0..=0xfa => Some((u64::from(b), 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> LexOptions {
        LexOptions::default()
    }

    #[test]
    fn placeholders_are_counted_outside_strings() {
        assert_eq!(placeholders("?", opts()), 1);
        assert_eq!(placeholders("? + ? + '?'", opts()), 2);
        assert_eq!(placeholders("5 /* ? */", opts()), 0);
    }

    #[test]
    fn bind_puts_each_value_in_parentheses() {
        let args = ["@x".to_string(), "1".to_string()];
        assert_eq!(bind("? + ?", &args, opts()).as_deref(), Some("(@x) + (1)"));
        assert_eq!(bind("?", &args, opts()), None, "count differs");
        assert_eq!(bind("5", &[], opts()).as_deref(), Some("5"));
    }

    fn exec(n: usize, nulls: u8, types: Option<&[u8]>, values: &[u8]) -> Vec<u8> {
        let mut p = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0];
        p.extend(std::iter::repeat_n(0, n.div_ceil(8)));
        p[10] = nulls;
        match types {
            Some(t) => {
                p.push(1);
                p.extend_from_slice(t);
            }
            None => p.push(0),
        }
        p.extend_from_slice(values);
        p
    }

    #[test]
    fn binary_values_become_literals() {
        // LONGLONG unsigned 12, TINY signed -1, a string "34", NULL.
        let types = [8, 0x80, 1, 0, 253, 0, 6, 0];
        let mut values = 12u64.to_le_bytes().to_vec();
        values.push(0xff);
        values.extend_from_slice(&[2, b'3', b'4']);
        let p = exec(4, 0b1000, Some(&types), &values);
        let (args, t) = binary_args(&p, 4, None).expect("bound");
        assert_eq!(args, ["12", "-1", "_binary X'3334'", "NULL"]);
        assert_eq!(t, types);
        // Types not sent again: the remembered ones are used.
        let p = exec(1, 0, None, &7i32.to_le_bytes());
        let (args, _) = binary_args(&p, 1, Some(&[3, 0])).expect("remembered");
        assert_eq!(args, ["7"]);
        assert_eq!(
            binary_args(&p, 1, None),
            Err(BadParams::Wrong),
            "never sent"
        );
    }

    #[test]
    fn cut_or_unreadable_values_are_refused() {
        let p = exec(1, 0, Some(&[8, 0]), &[1, 2, 3]);
        assert_eq!(binary_args(&p, 1, None), Err(BadParams::Wrong), "cut off");
        let p = exec(1, 0, Some(&[10, 0]), &[4, 0xe8, 0x07, 1, 1]);
        assert_eq!(binary_args(&p, 1, None), Err(BadParams::Wrong), "a DATE");
        let p = exec(1, 0, Some(&[253, 0]), &[9, b'1']);
        assert_eq!(
            binary_args(&p, 1, None),
            Err(BadParams::Wrong),
            "string cut off"
        );
    }

    #[test]
    fn using_lists_are_cut_at_top_level_commas() {
        let sql = b"EXECUTE s USING @a, CONCAT('1', '2'), 3";
        let toks: Vec<Token> = Lexer::new(sql, opts()).collect();
        let all = |_: &[u8], _: &[Token], _: usize| Some(String::new());
        assert_eq!(
            using_args(sql, &toks, all),
            Some(vec!["@a".into(), "CONCAT('1', '2')".into(), "3".into()])
        );
        let none = |_: &[u8], _: &[Token], _: usize| None;
        assert_eq!(using_args(sql, &toks, none), None, "not pure");
        // A second top-level USING ends what the purity check reads: what
        // follows it must not be bound unchecked.
        let sql = b"EXECUTE s USING 1 USING utf8) + GET_LOCK('l', 0) + (0";
        let toks: Vec<Token> = Lexer::new(sql, opts()).collect();
        assert_eq!(using_args(sql, &toks, all), None);
        let sql = b"EXECUTE s";
        let toks: Vec<Token> = Lexer::new(sql, opts()).collect();
        assert_eq!(using_args(sql, &toks, none), Some(vec![]));
    }
}
