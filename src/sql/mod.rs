//! TEMPORARY STUB (replaced by the lexer branch): types of the SQL analysis.
#![allow(missing_docs, dead_code)]

#[derive(Clone, Copy, Default, Debug)]
pub struct LexOptions {
    pub ansi_quotes: bool,
    pub no_backslash_escapes: bool,
}
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    pub statements: Vec<Statement>,
    pub incomplete: bool,
}
#[derive(Debug, Clone)]
pub struct Statement {
    pub span: std::ops::Range<usize>,
    pub kind: Kind,
    pub effects: Vec<Effect>,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Select,
    Insert,
    Update,
    Delete,
    Replace,
    Set,
    Call,
    Do,
    Begin,
    Commit,
    Rollback,
    Savepoint,
    ReleaseSavepoint,
    Use,
    Show,
    Kill,
    LockTables,
    UnlockTables,
    Flush,
    Handler,
    Prepare,
    Execute,
    ExecuteImmediate,
    Deallocate,
    Xa,
    Create,
    Drop,
    Alter,
    Rename,
    Truncate,
    LoadData,
    Backup,
    GetDiagnostics,
    Compound,
    RoutineDefinition,
    With,
    Values,
    Table,
    Other,
    Empty,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Session,
    Global,
    Default,
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillTarget {
    Id(u64),
    QueryId(u64),
    User(Vec<u8>),
    Expression,
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Func {
    LastInsertId { args: bool },
    RowCount,
    FoundRows,
    ConnectionId,
}
pub type TableName = (Option<Vec<u8>>, Vec<u8>);
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    UserVarAssign {
        name: Vec<u8>,
        null: bool,
    },
    TempTableCreate {
        schema: Option<Vec<u8>>,
        name: Vec<u8>,
    },
    TableDrop {
        temporary: bool,
        tables: Vec<TableName>,
    },
    TableRename {
        pairs: Vec<(TableName, TableName)>,
    },
    GetLock {
        name: Option<Vec<u8>>,
    },
    ReleaseLock {
        name: Option<Vec<u8>>,
    },
    ReleaseAllLocks,
    LockTables,
    UnlockTables,
    FlushReadLock,
    BackupStage {
        end: bool,
    },
    BackupLock {
        unlock: bool,
    },
    HandlerOpen {
        alias: Vec<u8>,
    },
    HandlerClose {
        alias: Vec<u8>,
    },
    TextPrepare {
        name: Vec<u8>,
    },
    Deallocate {
        name: Vec<u8>,
    },
    ExecutePrepared {
        name: Vec<u8>,
    },
    ExecuteImmediate,
    Xa,
    SetVariable {
        name: Vec<u8>,
        scope: Scope,
        to_default: bool,
    },
    SetNames {
        collation: Option<Vec<u8>>,
    },
    SetOther,
    SetTransaction {
        scope: Scope,
    },
    SetStatement,
    CalcFoundRows,
    Call,
    Function {
        func: Func,
        span: std::ops::Range<usize>,
    },
    Kill {
        query: bool,
        target: KillTarget,
    },
    DynamicKill,
    Use {
        schema: Vec<u8>,
    },
}
pub fn analyze(_sql: &[u8], _opts: LexOptions) -> Analysis {
    Analysis::default()
}
