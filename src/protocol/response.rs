//! Where a backend response ends: a state machine fed one logical packet at a
//! time (classified by its first chunk), for the response shapes of each
//! command. Backends always negotiate CLIENT_DEPRECATE_EOF, so a result set
//! is `column count, column defs, rows, 0xFE terminator` and the terminator
//! is any 0xFE packet shorter than 0xFFFFFF bytes.

use super::lenenc::Reader;
use super::packets::{EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER, OkPacket, status};

/// The shape of response a command produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// COM_QUERY, COM_STMT_EXECUTE: OK, ERR, LOCAL INFILE or result sets,
    /// chained by MORE_RESULTS_EXISTS.
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
    /// The server asks the client for a LOCAL INFILE.
    LocalInfile,
    /// The column count of a result set.
    ColumnCount,
    /// A column definition; `last` marks the end of the definition block.
    ColumnDef { last: bool },
    /// A parameter definition of a prepared statement.
    ParamDef { last: bool },
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
    Params { left: u16, columns: u16 },
    Columns { left: u64 },
    Rows,
    Done,
}

/// Tracks one backend response.
#[derive(Debug, Clone)]
pub struct Tracker {
    shape: Shape,
    state: State,
    /// Status flags of the last OK / terminator seen.
    pub last_status: Option<u16>,
}

impl Tracker {
    /// Starts tracking a response of the given shape.
    pub fn new(shape: Shape) -> Self {
        let state = match shape {
            Shape::FieldList => State::Columns { left: u64::MAX },
            Shape::Fetch => State::Rows,
            _ => State::Start,
        };
        Self {
            shape,
            state,
            last_status: None,
        }
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

    /// Classifies the next logical packet. `first` is the payload of its first
    /// chunk; `multi_chunk` is true when the packet continues past that chunk.
    pub fn next(&mut self, first: &[u8], multi_chunk: bool) -> Class {
        let head = first.first().copied();
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
                // An EOF-style OK (COM_SET_OPTION's reply under DEPRECATE_EOF).
                Some(EOF_HEADER) if !multi_chunk => match OkPacket::parse(first) {
                    Some(ok) => {
                        self.after_status(ok.status);
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
                    (true, 0) => State::Done,
                    (true, c) => State::Columns { left: u64::from(c) },
                };
                Class::ParamDef { last }
            }
            State::Columns { left } => {
                if self.shape == Shape::FieldList {
                    // Field lists have no count: definitions until the terminator.
                    return match head {
                        Some(EOF_HEADER) if !multi_chunk => self.terminator(first),
                        Some(ERR_HEADER) => {
                            self.state = State::Done;
                            Class::Err
                        }
                        _ => Class::ColumnDef { last: false },
                    };
                }
                let last = left == 1;
                self.state = if !last {
                    State::Columns { left: left - 1 }
                } else if self.shape == Shape::Prepare {
                    State::Done
                } else {
                    State::Rows
                };
                Class::ColumnDef { last }
            }
            State::Rows => match head {
                Some(EOF_HEADER) if !multi_chunk => self.terminator(first),
                Some(ERR_HEADER) => {
                    self.state = State::Done;
                    Class::Err
                }
                _ => Class::Row,
            },
        }
    }

    fn terminator(&mut self, first: &[u8]) -> Class {
        match OkPacket::parse(first) {
            Some(ok) => {
                self.after_status(ok.status);
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
}
