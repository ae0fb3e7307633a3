//! Where a backend response ends: a state machine fed one logical packet at a
//! time (classified by its first chunk), for the response shapes of each
//! command, in both terminator styles. With CLIENT_DEPRECATE_EOF a result
//! set is `column count, column defs, rows, 0xFE-OK terminator` (any 0xFE
//! packet shorter than 0xFFFFFF bytes); without it an EOF packet follows the
//! column (and parameter) definitions and the terminator is an EOF (0xFE,
//! shorter than 9 bytes). MariaDB progress packets (ERR with code 0xFFFF)
//! may come before the answer and never end it.

use super::lenenc::Reader;
use super::packets::{
    EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER, OkPacket, parse_eof, status,
};

/// The shape of response a command produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// COM_QUERY, COM_STMT_EXECUTE, COM_STMT_BULK_EXECUTE: OK, ERR, LOCAL
    /// INFILE or result sets, chained by MORE_RESULTS_EXISTS.
    Query,
    /// COM_STMT_PREPARE: prepare-OK + parameter and column definitions.
    Prepare,
    /// COM_FIELD_LIST: column definitions + terminator.
    FieldList,
    /// COM_STMT_FETCH: rows + terminator.
    Fetch,
    /// Commands answered by one packet of any kind (COM_STATISTICS).
    Single,
}

/// What a packet is, in the context of the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// An OK packet outside a result set.
    Ok,
    /// An ERR packet.
    Err,
    /// A MariaDB progress report (ERR header, code 0xFFFF): relayed to
    /// clients that asked for them, never the end of the response.
    Progress,
    /// The server asks the client for a LOCAL INFILE.
    LocalInfile,
    /// The column count of a result set.
    ColumnCount,
    /// A column definition; `last` marks the end of the definition block.
    ColumnDef { last: bool },
    /// A parameter definition of a prepared statement.
    ParamDef { last: bool },
    /// The EOF packet after a block of parameter or column definitions
    /// (only without DEPRECATE_EOF). After a COM_STMT_EXECUTE's metadata it
    /// ends the response when it reports an open cursor.
    Eof,
    /// The prepare-OK packet.
    PrepareOk { params: u16, columns: u16 },
    /// A row.
    Row,
    /// The 0xFE terminator of a result set or field list.
    Terminator,
    /// The single packet of a [`Shape::Single`] response.
    Single,
    /// Bytes that fit no rule (a protocol error by the backend).
    Malformed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    Params {
        left: u16,
        columns: u16,
    },
    /// The EOF after parameter definitions; `columns` follow it.
    ParamsEof {
        columns: u16,
    },
    Columns {
        left: u64,
    },
    /// The EOF after column definitions.
    ColumnsEof,
    Rows,
    Done,
}

/// Status flags and warnings of an OK, a 0xFE-OK terminator or an EOF.
pub fn end_status(payload: &[u8]) -> Option<(u16, u16)> {
    if payload.len() == 5 {
        return parse_eof(payload).map(|(warnings, status)| (status, warnings));
    }
    OkPacket::parse(payload).map(|ok| (ok.status, ok.warnings))
}

/// True for a MariaDB progress packet (ERR header, error code 0xFFFF).
pub fn is_progress(payload: &[u8]) -> bool {
    payload.len() >= 3 && payload[0] == ERR_HEADER && payload[1] == 0xFF && payload[2] == 0xFF
}

/// Tracks one backend response.
#[derive(Debug, Clone)]
pub struct Tracker {
    shape: Shape,
    state: State,
    deprecate_eof: bool,
    /// The command asked for a cursor (COM_STMT_EXECUTE with a cursor
    /// type): a metadata EOF flagged CURSOR_EXISTS ends the response.
    cursor: bool,
    /// Status flags of the last OK / terminator seen.
    pub last_status: Option<u16>,
}

impl Tracker {
    /// Starts tracking a response of the given shape from a connection that
    /// negotiated CLIENT_DEPRECATE_EOF.
    pub fn new(shape: Shape) -> Self {
        Self::with_style(shape, true)
    }

    /// Starts tracking a response of the given shape in the terminator style
    /// of the connection (`deprecate_eof`: CLIENT_DEPRECATE_EOF negotiated).
    pub fn with_style(shape: Shape, deprecate_eof: bool) -> Self {
        let state = match shape {
            Shape::FieldList => State::Columns { left: u64::MAX },
            Shape::Fetch => State::Rows,
            _ => State::Start,
        };
        Self {
            shape,
            state,
            deprecate_eof,
            cursor: false,
            last_status: None,
        }
    }

    /// The command asked for a cursor. Only then does CURSOR_EXISTS on the
    /// metadata EOF mean "rows come by FETCH": a text query running stored
    /// code that opened a cursor of its own also reports the flag there
    /// (MariaDB 10.11, `BEGIN NOT ATOMIC … OPEN cur …`), and its rows follow.
    pub fn expect_cursor(mut self, cursor: bool) -> Self {
        self.cursor = cursor;
        self
    }

    /// True once the response is complete.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// After a LOCAL INFILE exchange, the server answers with OK or ERR.
    pub fn resume_after_infile(&mut self) {
        self.state = State::Start;
    }

    fn after_status(&mut self, status: u16) {
        self.last_status = Some(status);
        self.state = if status & status::MORE_RESULTS_EXISTS != 0 {
            State::Start
        } else {
            State::Done
        };
    }

    /// True when `first` is a terminator in this connection's style.
    fn is_terminator(&self, first: &[u8], multi_chunk: bool) -> bool {
        first.first() == Some(&EOF_HEADER)
            && !multi_chunk
            && (self.deprecate_eof || first.len() < 9)
    }

    /// The state after the last definition of a block.
    fn after_columns(&self) -> State {
        if !self.deprecate_eof {
            State::ColumnsEof
        } else if self.shape == Shape::Prepare {
            State::Done
        } else {
            State::Rows
        }
    }

    /// Classifies the next logical packet. `first` is the payload of its first
    /// chunk; `multi_chunk` is true when the packet continues past that chunk.
    pub fn next(&mut self, first: &[u8], multi_chunk: bool) -> Class {
        let head = first.first().copied();
        if head == Some(ERR_HEADER)
            && is_progress(first)
            && matches!(
                self.state,
                State::Start | State::Rows | State::Columns { .. }
            )
            && self.shape != Shape::Single
        {
            return Class::Progress;
        }
        match self.state {
            State::Done => Class::Malformed,
            State::Start if self.shape == Shape::Single => {
                self.state = State::Done;
                Class::Single
            }
            State::Start => match head {
                Some(ERR_HEADER) => {
                    self.state = State::Done;
                    Class::Err
                }
                Some(OK_HEADER) if self.shape == Shape::Prepare => {
                    let mut r = Reader::new(first);
                    let parsed = (|| {
                        r.u8()?;
                        r.u32()?;
                        Some((r.u16()?, r.u16()?))
                    })();
                    let Some((columns, params)) = parsed else {
                        self.state = State::Done;
                        return Class::Malformed;
                    };
                    self.state = if params > 0 {
                        State::Params {
                            left: params,
                            columns,
                        }
                    } else if columns > 0 {
                        State::Columns {
                            left: u64::from(columns),
                        }
                    } else {
                        State::Done
                    };
                    Class::PrepareOk { params, columns }
                }
                Some(OK_HEADER) => match OkPacket::parse(first) {
                    Some(ok) => {
                        self.after_status(ok.status);
                        Class::Ok
                    }
                    None => {
                        self.state = State::Done;
                        Class::Malformed
                    }
                },
                // An EOF-style reply (COM_SET_OPTION's: an EOF, or a 0xFE-OK
                // under DEPRECATE_EOF).
                Some(EOF_HEADER) if !multi_chunk => match end_status(first) {
                    Some((status, _)) => {
                        self.after_status(status);
                        Class::Ok
                    }
                    None => {
                        self.state = State::Done;
                        Class::Malformed
                    }
                },
                Some(LOCAL_INFILE_HEADER) if self.shape == Shape::Query => Class::LocalInfile,
                Some(_) if self.shape == Shape::Query => match Reader::new(first).lenenc_int() {
                    Some(n) if n > 0 => {
                        self.state = State::Columns { left: n };
                        Class::ColumnCount
                    }
                    _ => {
                        self.state = State::Done;
                        Class::Malformed
                    }
                },
                _ => {
                    self.state = State::Done;
                    Class::Malformed
                }
            },
            State::Params { left, columns } => {
                let last = left == 1;
                self.state = match (last, columns) {
                    (false, _) => State::Params {
                        left: left - 1,
                        columns,
                    },
                    (true, c) if !self.deprecate_eof => State::ParamsEof { columns: c },
                    (true, 0) => State::Done,
                    (true, c) => State::Columns { left: u64::from(c) },
                };
                Class::ParamDef { last }
            }
            State::ParamsEof { columns } => {
                if !self.is_terminator(first, multi_chunk) {
                    self.state = State::Done;
                    return Class::Malformed;
                }
                self.state = if columns == 0 {
                    State::Done
                } else {
                    State::Columns {
                        left: u64::from(columns),
                    }
                };
                Class::Eof
            }
            State::Columns { left } => {
                if self.shape == Shape::FieldList {
                    // Field lists have no count: definitions until the terminator.
                    return match head {
                        Some(EOF_HEADER) if self.is_terminator(first, multi_chunk) => {
                            self.terminator(first)
                        }
                        Some(ERR_HEADER) => {
                            self.state = State::Done;
                            Class::Err
                        }
                        _ => Class::ColumnDef { last: false },
                    };
                }
                let last = left == 1;
                self.state = if last {
                    self.after_columns()
                } else {
                    State::Columns { left: left - 1 }
                };
                Class::ColumnDef { last }
            }
            State::ColumnsEof => {
                if !self.is_terminator(first, multi_chunk) {
                    self.state = State::Done;
                    return Class::Malformed;
                }
                let Some((status, _)) = end_status(first) else {
                    self.state = State::Done;
                    return Class::Malformed;
                };
                self.state = if self.shape == Shape::Prepare {
                    State::Done
                } else if self.cursor && status & status::CURSOR_EXISTS != 0 {
                    // COM_STMT_EXECUTE opened a cursor: rows come by FETCH.
                    self.last_status = Some(status);
                    State::Done
                } else {
                    State::Rows
                };
                Class::Eof
            }
            State::Rows => match head {
                Some(EOF_HEADER) if self.is_terminator(first, multi_chunk) => {
                    self.terminator(first)
                }
                Some(ERR_HEADER) => {
                    self.state = State::Done;
                    Class::Err
                }
                _ => Class::Row,
            },
        }
    }

    fn terminator(&mut self, first: &[u8]) -> Class {
        match end_status(first) {
            Some((status, _)) => {
                self.after_status(status);
                Class::Terminator
            }
            None => {
                self.state = State::Done;
                Class::Malformed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLDEF: &[u8] =
        b"\x03def\x00\x00\x00\x011\x00\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00";

    fn term(status: u16) -> Vec<u8> {
        let mut v = vec![0xFE, 0, 0];
        v.extend_from_slice(&status.to_le_bytes());
        v.extend_from_slice(&[0, 0]);
        v
    }

    #[test]
    fn single_result_set() {
        let mut t = Tracker::new(Shape::Query);
        assert_eq!(t.next(&[1], false), Class::ColumnCount);
        assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: true });
        assert_eq!(t.next(b"\x011", false), Class::Row);
        assert!(!t.done());
        assert_eq!(t.next(&term(0x0002), false), Class::Terminator);
        assert!(t.done());
        assert_eq!(t.last_status, Some(2));
    }

    #[test]
    fn multi_results_chain() {
        // CALL p(): two result sets, then the final OK.
        let mut t = Tracker::new(Shape::Query);
        for _ in 0..2 {
            assert_eq!(t.next(&[2], false), Class::ColumnCount);
            assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: false });
            assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: true });
            assert_eq!(t.next(&term(0x000A), false), Class::Terminator);
            assert!(!t.done());
        }
        assert_eq!(t.next(&[0, 0, 0, 2, 0, 0, 0], false), Class::Ok);
        assert!(t.done());
    }

    #[test]
    fn huge_row_starting_with_fe_is_a_row() {
        let mut t = Tracker::new(Shape::Query);
        t.next(&[1], false);
        t.next(COLDEF, false);
        // A text row whose first cell has an 8-byte length prefix.
        assert_eq!(t.next(&[0xFE, 0, 0, 0, 1, 0, 0, 0, 0], true), Class::Row);
        assert!(!t.done());
    }

    #[test]
    fn error_mid_rows_ends() {
        let mut t = Tracker::new(Shape::Query);
        t.next(&[1], false);
        t.next(COLDEF, false);
        t.next(b"\x011", false);
        assert_eq!(t.next(b"\xff\x15\x04#HY000x", false), Class::Err);
        assert!(t.done());
    }

    #[test]
    fn prepare_shape() {
        let mut t = Tracker::new(Shape::Prepare);
        let ok = [0, 1, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0];
        assert_eq!(
            t.next(&ok, false),
            Class::PrepareOk {
                params: 2,
                columns: 1
            }
        );
        assert_eq!(t.next(COLDEF, false), Class::ParamDef { last: false });
        assert_eq!(t.next(COLDEF, false), Class::ParamDef { last: true });
        assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: true });
        assert!(t.done());
    }

    #[test]
    fn field_list_and_single() {
        let mut t = Tracker::new(Shape::FieldList);
        assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: false });
        assert_eq!(t.next(&term(2), false), Class::Terminator);
        assert!(t.done());
        let mut t = Tracker::new(Shape::Single);
        assert_eq!(t.next(b"Uptime: 5", false), Class::Single);
        assert!(t.done());
    }

    #[test]
    fn garbage_is_malformed_not_panic() {
        let mut t = Tracker::new(Shape::Query);
        assert_eq!(t.next(&[], false), Class::Malformed);
        let mut t = Tracker::new(Shape::Query);
        assert_eq!(t.next(&[0x00, 0xFC], false), Class::Malformed);
        assert!(t.done());
    }

    fn eof(status: u16) -> Vec<u8> {
        let mut v = vec![0xFE, 0, 0];
        v.extend_from_slice(&status.to_le_bytes());
        v
    }

    #[test]
    fn classic_result_set_with_eofs() {
        let mut t = Tracker::with_style(Shape::Query, false);
        assert_eq!(t.next(&[1], false), Class::ColumnCount);
        assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: true });
        assert_eq!(t.next(&eof(0x000A), false), Class::Eof);
        assert!(!t.done(), "MORE_RESULTS on the metadata EOF is not the end");
        // A row starting with 0xFE (8-byte length prefix) is at least 9 bytes.
        assert_eq!(
            t.next(&[0xFE, 1, 0, 0, 0, 0, 0, 0, 0, b'x'], false),
            Class::Row
        );
        assert_eq!(t.next(&eof(0x0002), false), Class::Terminator);
        assert!(t.done());
        assert_eq!(t.last_status, Some(2));
    }

    #[test]
    fn classic_cursor_ends_at_metadata_eof() {
        let mut t = Tracker::with_style(Shape::Query, false).expect_cursor(true);
        t.next(&[1], false);
        t.next(COLDEF, false);
        assert_eq!(t.next(&eof(0x0042), false), Class::Eof);
        assert!(t.done());
        assert_eq!(t.last_status, Some(0x42));
    }

    #[test]
    fn stored_code_cursor_flag_on_a_text_query_keeps_the_rows() {
        // BEGIN NOT ATOMIC … OPEN cur …: the metadata EOF says CURSOR_EXISTS
        // (0x6a), yet the rows follow.
        let mut t = Tracker::with_style(Shape::Query, false);
        t.next(&[1], false);
        t.next(COLDEF, false);
        assert_eq!(t.next(&eof(0x006a), false), Class::Eof);
        assert!(!t.done());
        assert_eq!(t.next(&[1, b'1'], false), Class::Row);
        t.next(&eof(0x0002), false);
        assert!(t.done());
    }

    #[test]
    fn classic_out_params_call_chain() {
        // CALL p(?) with an OUT parameter through COM_STMT_EXECUTE, direct
        // from MariaDB without DEPRECATE_EOF: result set flagged
        // PS_OUT_PARAMS | MORE_RESULTS, then the final OK.
        let mut t = Tracker::with_style(Shape::Query, false);
        t.next(&[1], false);
        t.next(COLDEF, false);
        assert_eq!(t.next(&eof(0x100A), false), Class::Eof);
        assert_eq!(t.next(&[0, 0, 7], false), Class::Row);
        assert_eq!(t.next(&eof(0x100A), false), Class::Terminator);
        assert!(!t.done());
        assert_eq!(t.next(&[0, 0, 0, 2, 0, 0, 0], false), Class::Ok);
        assert!(t.done());
    }

    #[test]
    fn classic_prepare_and_field_list() {
        let mut t = Tracker::with_style(Shape::Prepare, false);
        let ok = [0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        assert!(matches!(t.next(&ok, false), Class::PrepareOk { .. }));
        assert_eq!(t.next(COLDEF, false), Class::ParamDef { last: true });
        assert_eq!(t.next(&eof(2), false), Class::Eof);
        assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: true });
        assert_eq!(t.next(&eof(2), false), Class::Eof);
        assert!(t.done());
        // Params only.
        let mut t = Tracker::with_style(Shape::Prepare, false);
        let ok = [0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        t.next(&ok, false);
        t.next(COLDEF, false);
        assert_eq!(t.next(&eof(2), false), Class::Eof);
        assert!(t.done());
        // A definition where the EOF belongs is a protocol error.
        let mut t = Tracker::with_style(Shape::Prepare, false);
        t.next(&ok, false);
        t.next(COLDEF, false);
        assert_eq!(t.next(COLDEF, false), Class::Malformed);
        let mut t = Tracker::with_style(Shape::FieldList, false);
        assert_eq!(t.next(COLDEF, false), Class::ColumnDef { last: false });
        assert_eq!(t.next(&eof(2), false), Class::Terminator);
        assert!(t.done());
    }

    #[test]
    fn classic_set_option_reply() {
        let mut t = Tracker::with_style(Shape::Query, false);
        assert_eq!(t.next(&eof(2), false), Class::Ok);
        assert!(t.done());
        assert_eq!(end_status(&eof(0x4002)), Some((0x4002, 0)));
    }

    #[test]
    fn progress_packets_do_not_end_the_response() {
        // ff ff ff, stage 1 of 2, 12.345%, "copy to tmp table".
        let mut p = vec![0xFF, 0xFF, 0xFF, 1, 2, 0x39, 0x30, 0x00, 17];
        p.extend_from_slice(b"copy to tmp table");
        for style in [true, false] {
            let mut t = Tracker::with_style(Shape::Query, style);
            assert_eq!(t.next(&p, false), Class::Progress);
            assert_eq!(t.next(&p, false), Class::Progress);
            assert!(!t.done());
            assert_eq!(t.next(&[0, 1, 0, 2, 0, 0, 0], false), Class::Ok);
            assert!(t.done());
        }
        // A real error is still the end.
        let mut t = Tracker::new(Shape::Query);
        assert_eq!(t.next(b"\xff\x15\x04#HY000x", false), Class::Err);
        assert!(t.done());
    }
}
