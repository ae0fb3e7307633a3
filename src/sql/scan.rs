//! A cheap scan for the words that let SQL text end or interrupt server
//! threads (`KILL`) or run text the lexer never sees (`PREPARE … FROM`,
//! `EXECUTE IMMEDIATE`), in any ASCII-compatible character set and over text
//! that arrives in pieces.
//!
//! Owns only the question "may this text contain one of those words as a
//! keyword"; it over-approximates and never under-approximates:
//! - a word is a run of `[A-Za-z0-9_$]` and bytes from 0x80 up (the
//!   server's identifier bytes); a keyword can only be a whole such run, so
//!   a byte from 0x80 up next to the letters (a multi-byte character of sjis
//!   or gbk, even one whose trail byte is a letter) makes the run no keyword;
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
    /// The current word's first bytes, lowercased.
    word: [u8; 9],
    /// Its length (past 9: too long to be one of ours).
    len: usize,
    /// The run so far is ASCII digits only: a letter next ends them as
    /// far as the word goes (`/*!50000KILL*/` is KILL to the server).
    digits: bool,
    found: Found,
}

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

impl WordScan {
    /// A scanner at the start of a text.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            state: State::Code,
            word: [0; 9],
            len: 0,
            digits: false,
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
        let w = &self.word[..self.len.min(9)];
        let hit = match self.len {
            4 if w == b"kill" => Found::KILL,
            7 if w == b"prepare" => Found::PREPARE,
            9 if w == b"immediate" => Found::IMMEDIATE,
            _ => Found::default(),
        };
        self.found.0 |= hit.0;
        self.len = 0;
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
                self.digits = true;
            }
            if self.digits && !b.is_ascii_digit() {
                self.digits = false;
                self.len = 0;
            }
            if self.len < 9 {
                self.word[self.len] = b.to_ascii_lowercase();
            }
            self.len = self.len.saturating_add(1);
            return;
        }
        self.end_word();
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

/// The words of `text` (every run, strings and comments included, a run's
/// leading digits apart): what
/// [`Mode::Words`] finds, found faster over a whole text (it runs on every
/// query) by looking only where a word may start with one of ours.
pub fn words(text: &[u8]) -> Found {
    const OURS: [(&[u8], Found); 3] = [
        (b"kill", Found::KILL),
        (b"prepare", Found::PREPARE),
        (b"immediate", Found::IMMEDIATE),
    ];
    let mut found = Found::default();
    for (i, &b) in text.iter().enumerate() {
        // `| 0x20` maps exactly K/k, P/p and I/i onto these three.
        let lower = b | 0x20;
        if !matches!(lower, b'k' | b'p' | b'i') {
            continue;
        }
        // A run of digits right before counts apart (`/*!50000KILL*/`,
        // `/*M!100000KILL*/`: the server reads a version, then the word).
        let start = text[..i]
            .iter()
            .rposition(|c| !c.is_ascii_digit())
            .map_or(0, |p| p + 1);
        if start > 0 && word_byte(text[start - 1]) {
            continue;
        }
        for (word, hit) in OURS {
            let end = i + word.len();
            if text
                .get(i..end)
                .is_some_and(|w| w.eq_ignore_ascii_case(word))
                && text.get(end).is_none_or(|&c| !word_byte(c))
            {
                found.0 |= hit.0;
            }
        }
    }
    found
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
        assert!(words(b"execute Immediate @q").has(Found::IMMEDIATE));
        for none in [
            &b"SELECT * FROM skill"[..],
            b"SELECT killer",
            b"SELECT kill_5",
            b"SELECT $kill",
            b"\x83kill",
            b"kill\x83",
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
        for text in [&b"/*!50000KILL*/ 5"[..], b"/*M!100000KILL*/ 5", b"1kill"] {
            assert!(
                words(text).has(Found::KILL),
                "{:?}",
                String::from_utf8_lossy(text)
            );
            let mut s = WordScan::new(Mode::Quotes(LexOptions::default()));
            s.feed(text);
            assert!(s.finish().has(Found::KILL));
        }
        for text in [&b"x5kill"[..], b"skill", b"5x_kill", b"'/*!50000KILL*/'"] {
            let mut s = WordScan::new(Mode::Quotes(LexOptions::default()));
            s.feed(text);
            assert!(
                !s.finish().has(Found::KILL),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
