//! A cheap scan for the words that let SQL text end or interrupt server
//! threads (`KILL`) or run text the lexer never sees (`PREPARE … FROM`,
//! `EXECUTE IMMEDIATE`), in any ASCII-compatible character set and over text
//! that arrives in pieces.
//!
//! Owns only the question "may this text contain one of those words as a
//! keyword"; it over-approximates and never under-approximates:
//! - a run is a stretch of `[A-Za-z0-9_$]`; one of our words counts when it
//!   ends a run and starts it, or the run starts with a digit (the server
//!   may read a number first: `/*!50000KILL*/` is a version and KILL,
//!   `1146e0KILL` the number `1146e0` and KILL, `0x1fKILL` a hex number
//!   and KILL), or the word follows `\N` (NULL). Bytes from 0x80 up separate runs: in a single-byte character
//!   set some of them are spaces or symbols to the server (latin1's 0xA0),
//!   and a multi-byte character next to the letters only adds a match;
//! - [`Mode::Words`] looks at every run, inside strings and comments too
//!   (sound for every client character set, including those whose trail
//!   bytes look like quotes);
//! - [`Mode::Quotes`] skips string literals, quoted identifiers and
//!   ordinary comments exactly as `lexer` does (executable comments are
//!   code); only for character sets the lexer reads reliably.

use super::LexOptions;

/// Which words were seen (bit set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Found(u8);

impl Found {
    /// `KILL`.
    pub const KILL: Found = Found(1);
    /// `PREPARE`.
    pub const PREPARE: Found = Found(2);
    /// `IMMEDIATE` (of `EXECUTE IMMEDIATE`).
    pub const IMMEDIATE: Found = Found(4);

    /// Nothing seen.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `other` was seen.
    pub fn has(self, other: Found) -> bool {
        self.0 & other.0 != 0
    }
}

/// How strings and comments are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every word counts, wherever it is.
    Words,
    /// Words in strings, quoted identifiers and ordinary comments do not
    /// count (the lexer's rules under these options).
    Quotes(LexOptions),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Code,
    /// After `-` in code.
    Dash,
    /// After `--` in code.
    Dash2,
    /// After `/` in code.
    Slash,
    /// After `/*`.
    Open,
    /// After `/*M`.
    OpenM,
    Block,
    /// After `*` in a block comment.
    BlockStar,
    Line,
    Quote(u8),
    /// After a backslash in a string quoted with this byte.
    Escape(u8),
}

/// The scanner; feed it pieces in order, then [`WordScan::finish`].
#[derive(Clone, Debug)]
pub struct WordScan {
    mode: Mode,
    state: State,
    /// The current run's last 9 bytes, lowercased (the oldest first).
    tail: [u8; 9],
    /// The run's length.
    len: usize,
    /// The run starts with an ASCII digit.
    digit_first: bool,
    /// The run started right after a backslash.
    after_backslash: bool,
    /// The last byte scanned as code was a backslash.
    backslash: bool,
    found: Found,
}

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Our words, longest last.
const OURS: [(&[u8], Found); 3] = [
    (b"kill", Found::KILL),
    (b"prepare", Found::PREPARE),
    (b"immediate", Found::IMMEDIATE),
];

/// Whether one of our words may start a `prefix`-long part into a run: it
/// starts the run, or the run starts with a digit (a number the server
/// reads apart), or the part before it is the `N` of `\N`.
fn starts_apart(prefix: usize, digit_first: bool, n_after_backslash: bool) -> bool {
    prefix == 0 || digit_first || (prefix == 1 && n_after_backslash)
}

impl WordScan {
    /// A scanner at the start of a text.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            state: State::Code,
            tail: [0; 9],
            len: 0,
            digit_first: false,
            after_backslash: false,
            backslash: false,
            found: Found::default(),
        }
    }

    /// What was seen so far (a word still running at the end of what was
    /// fed is not counted until [`Self::finish`] or the next byte).
    pub fn found(&self) -> Found {
        self.found
    }

    /// Scans the next piece of the text.
    pub fn feed(&mut self, text: &[u8]) {
        for &b in text {
            self.byte(b);
        }
    }

    /// Ends the text; everything seen.
    pub fn finish(&mut self) -> Found {
        self.end_word();
        self.found
    }

    fn end_word(&mut self) {
        if self.len == 0 {
            return;
        }
        let n_after_backslash = self.after_backslash && self.first_letter_n();
        for (word, hit) in OURS {
            let k = word.len();
            if self.len >= k
                && &self.tail[9 - k..] == word
                && starts_apart(self.len - k, self.digit_first, n_after_backslash)
            {
                self.found.0 |= hit.0;
            }
        }
        self.len = 0;
    }

    /// The run's first byte is `n` (known only while the run is short
    /// enough for the tail to hold it, which is all `\N` needs).
    fn first_letter_n(&self) -> bool {
        self.len <= 9 && self.tail[9 - self.len] == b'n'
    }

    fn byte(&mut self, b: u8) {
        let Mode::Quotes(opts) = self.mode else {
            self.code_byte(b);
            return;
        };
        match self.state {
            State::Code => self.code_byte(b),
            State::Dash => {
                self.state = State::Code;
                if b == b'-' {
                    self.state = State::Dash2;
                } else {
                    self.code_byte(b);
                }
            }
            State::Dash2 => {
                if b <= 0x20 || b == 0x7f {
                    self.state = State::Line;
                    if b == b'\n' || b == 0 {
                        self.state = State::Code;
                    }
                } else {
                    self.state = State::Code;
                    self.code_byte(b);
                }
            }
            State::Slash => {
                self.state = State::Code;
                if b == b'*' {
                    self.state = State::Open;
                } else {
                    self.code_byte(b);
                }
            }
            State::Open => {
                self.state = match b {
                    // An executable comment is code.
                    b'!' => State::Code,
                    b'M' => State::OpenM,
                    b'*' => State::BlockStar,
                    _ => State::Block,
                }
            }
            State::OpenM => {
                self.state = match b {
                    b'!' => State::Code,
                    b'*' => State::BlockStar,
                    _ => State::Block,
                }
            }
            State::Block => {
                if b == b'*' {
                    self.state = State::BlockStar;
                }
            }
            State::BlockStar => {
                self.state = match b {
                    b'/' => State::Code,
                    b'*' => State::BlockStar,
                    _ => State::Block,
                }
            }
            State::Line => {
                if b == b'\n' || b == 0 {
                    self.state = State::Code;
                }
            }
            State::Quote(q) => {
                let escapes =
                    !opts.no_backslash_escapes && (q == b'\'' || (q == b'"' && !opts.ansi_quotes));
                if b == b'\\' && escapes {
                    self.state = State::Escape(q);
                } else if b == q {
                    // A doubled quote closes and reopens: same result.
                    self.state = State::Code;
                }
            }
            State::Escape(q) => self.state = State::Quote(q),
        }
    }

    fn code_byte(&mut self, b: u8) {
        if word_byte(b) {
            if self.len == 0 {
                self.digit_first = b.is_ascii_digit();
                self.after_backslash = self.backslash;
            }
            self.tail.copy_within(1.., 0);
            self.tail[8] = b.to_ascii_lowercase();
            self.len = self.len.saturating_add(1);
            self.backslash = false;
            return;
        }
        self.end_word();
        self.backslash = b == b'\\';
        if matches!(self.mode, Mode::Words) {
            return;
        }
        self.state = match b {
            b'\'' | b'"' | b'`' => State::Quote(b),
            b'#' => State::Line,
            b'-' => State::Dash,
            b'/' => State::Slash,
            _ => State::Code,
        };
    }
}

/// Where one of our words is spelled in `text` (any case): its start, end
/// and which. Only a byte that may start one is compared further.
fn spelled(text: &[u8]) -> impl Iterator<Item = (usize, usize, Found)> + '_ {
    text.iter()
        .enumerate()
        // `| 0x20` maps exactly K/k, P/p and I/i onto these three.
        .filter(|(_, b)| matches!(*b | 0x20, b'k' | b'p' | b'i'))
        .flat_map(move |(i, _)| {
            OURS.iter().filter_map(move |(word, hit)| {
                let end = i + word.len();
                text.get(i..end)
                    .is_some_and(|w| w.eq_ignore_ascii_case(word))
                    .then_some((i, end, *hit))
            })
        })
}

/// The words of `text` (every run, strings and comments included): what
/// [`Mode::Words`] finds, found faster over a whole text (it runs on every
/// query) by comparing only where one of ours may start.
pub fn words(text: &[u8]) -> Found {
    let mut found = Found::default();
    for (i, end, hit) in spelled(text) {
        if text.get(end).is_none_or(|&c| !word_byte(c)) && starts_a_word(text, i) {
            found.0 |= hit.0;
        }
    }
    found
}

/// Whether a word of ours at `i` (matched, ending its run) starts apart
/// (see [`starts_apart`]): looked at only after a match, so the common
/// byte costs one comparison.
fn starts_a_word(text: &[u8], i: usize) -> bool {
    let run_start = text[..i]
        .iter()
        .rposition(|&c| !word_byte(c))
        .map_or(0, |p| p + 1);
    let n_after_backslash =
        run_start > 0 && text[run_start - 1] == b'\\' && text[run_start] | 0x20 == b'n';
    starts_apart(
        i - run_start,
        text[run_start].is_ascii_digit(),
        n_after_backslash,
    )
}

/// Whether one of our words touches a byte from 0x80 up: where that byte
/// is a space or a symbol to the server (latin1's 0xA0), the server reads
/// the word alone while the lexer reads it as part of a name.
pub fn glued_to_high_byte(text: &[u8]) -> bool {
    spelled(text).any(|(i, end, _)| {
        i.checked_sub(1).is_some_and(|p| text[p] >= 0x80)
            || text.get(end).is_some_and(|&c| c >= 0x80)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(text: &[u8]) -> Found {
        let mut s = WordScan::new(Mode::Quotes(LexOptions::default()));
        s.feed(text);
        s.finish()
    }

    /// The fast whole-text scan finds what the byte-at-a-time scanner
    /// finds, on texts built from the pieces that matter (our words in
    /// both cases, word bytes next to them, separators, quotes, bytes
    /// from 0x80 up).
    #[test]
    fn fast_words_agree_with_the_scanner() {
        let pieces: [&[u8]; 14] = [
            b"kill",
            b"KiLl",
            b"prepare",
            b"PREPARE",
            b"immediate",
            b"Immediate",
            b"x",
            b"_",
            b"$",
            b"5",
            b" ",
            b"'",
            b"\x83",
            b";",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let mut text = Vec::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 7) as usize;
            let mut r = seed;
            for _ in 0..n {
                text.extend_from_slice(pieces[(r % pieces.len() as u64) as usize]);
                r /= pieces.len() as u64;
            }
            let mut slow = WordScan::new(Mode::Words);
            slow.feed(&text);
            assert_eq!(
                words(&text),
                slow.finish(),
                "{:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn whole_words_only() {
        assert!(words(b"KILL 5").has(Found::KILL));
        assert!(words(b"select 1;kill\t5").has(Found::KILL));
        assert!(words(b"/*!kill*/").has(Found::KILL));
        assert!(
            words(b"SELECT 'kill'").has(Found::KILL),
            "words mode sees strings"
        );
        assert!(words(b"PREPARE s FROM @q").has(Found::PREPARE));
        // Digits right before count apart, as a version comment's do
        // (over-approximates `5kill`, an identifier to the server).
        assert!(words(b"SELECT 5kill").has(Found::KILL));
        // Bytes from 0x80 up separate (latin1's 0xA0 is a space to the
        // server; next to a multi-byte character this over-approximates).
        assert!(words(b"\x83kill").has(Found::KILL));
        assert!(words(b"kill\x83").has(Found::KILL));
        assert!(words(b"execute Immediate @q").has(Found::IMMEDIATE));
        for none in [
            &b"SELECT * FROM skill"[..],
            b"SELECT killer",
            b"SELECT kill_5",
            b"SELECT $kill",
            b"SELECT x5_kill",
            b"preparedness immediately",
        ] {
            assert!(
                words(none).is_empty(),
                "{:?}",
                String::from_utf8_lossy(none)
            );
        }
    }

    #[test]
    fn strings_and_comments_skipped_in_quotes_mode() {
        assert!(quoted(b"SELECT 'kill 5'").is_empty());
        assert!(quoted(b"SELECT \"it\\\" kill\"").is_empty());
        assert!(quoted(b"SELECT `a kill`").is_empty());
        assert!(quoted(b"SELECT 1 -- kill\n").is_empty());
        assert!(quoted(b"SELECT 1 # kill").is_empty());
        assert!(quoted(b"SELECT /* kill */ 1").is_empty());
        assert!(quoted(b"SELECT 'a''b'; KILL 5").has(Found::KILL));
        assert!(quoted(b"SELECT 1 --kill").has(Found::KILL), "not a comment");
        assert!(quoted(b"SELECT 1 -- x\nKILL 5").has(Found::KILL));
        assert!(quoted(b"SELECT 1 -- x\0KILL 5").has(Found::KILL));
        assert!(quoted(b"SELECT /*! KILL */ 1").has(Found::KILL));
        assert!(quoted(b"SELECT /*M!100000 KILL */ 1").has(Found::KILL));
        assert!(quoted(b"SELECT /**/ KILL").has(Found::KILL));
        // A backslash escapes nothing in an identifier.
        assert!(quoted(b"SELECT `a\\`; KILL 5; -- `").has(Found::KILL));
        let ansi = LexOptions {
            ansi_quotes: true,
            no_backslash_escapes: false,
        };
        let mut s = WordScan::new(Mode::Quotes(ansi));
        s.feed(b"SELECT \"a\\\"; KILL 5; -- \"");
        assert!(s.finish().has(Found::KILL));
        let nbe = LexOptions {
            ansi_quotes: false,
            no_backslash_escapes: true,
        };
        let mut s = WordScan::new(Mode::Quotes(nbe));
        s.feed(b"SELECT 'a\\'; KILL 5; -- '");
        assert!(s.finish().has(Found::KILL));
    }

    #[test]
    fn pieces_give_the_same_answer() {
        let text = b"SELECT 'x', /* c */ 1; KILL 5 -- '";
        for at in 0..text.len() {
            let mut s = WordScan::new(Mode::Quotes(LexOptions::default()));
            s.feed(&text[..at]);
            s.feed(&text[at..]);
            assert!(s.finish().has(Found::KILL), "split at {at}");
        }
        let mut s = WordScan::new(Mode::Words);
        s.feed(b"SELECT 1; KI");
        s.feed(b"LL");
        assert!(s.found().is_empty(), "the word may go on");
        assert!(s.finish().has(Found::KILL));
    }

    #[test]
    fn a_version_comments_digits_do_not_hide_a_word() {
        for text in [
            &b"/*!50000KILL*/ 5"[..],
            b"/*M!100000KILL*/ 5",
            b"1kill",
            b"FOR 1146e0KILL 5",
            b"1.146e3KILL 5",
            b".5e0KILL 5",
            b"SELECT \\Nkill",
            b"\xa0KILL 5",
            b"0x1fKILL 5",
            b"5x_kill",
        ] {
            assert!(
                words(text).has(Found::KILL),
                "{:?}",
                String::from_utf8_lossy(text)
            );
            let mut s = WordScan::new(Mode::Quotes(LexOptions::default()));
            s.feed(text);
            assert!(s.finish().has(Found::KILL));
        }
        for text in [
            &b"skill"[..],
            b"x5kill",
            b"'/*!50000KILL*/'",
            b"nkill",
            b"\\nokill",
        ] {
            let mut s = WordScan::new(Mode::Quotes(LexOptions::default()));
            s.feed(text);
            assert!(
                !s.finish().has(Found::KILL),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_word_next_to_a_high_byte_is_glued() {
        assert!(glued_to_high_byte(b"\xa0KILL 5"));
        assert!(glued_to_high_byte(b"KILL\xa0QUERY 5"));
        assert!(!glued_to_high_byte(b"KILL QUERY 5 -- caf\xc3\xa9"));
        assert!(!glued_to_high_byte(b"SELECT '\xc3\xa9'"));
    }
}
