//! Prepared statements without pinning (design §5): the shared registry of
//! prepare responses, each backend connection's statement-id map, and the
//! byte-level rewriting of COM_STMT_* requests.

pub mod backend_map;
pub mod execute;
pub mod registry;

pub use backend_map::{BackendStmt, BackendStmts};
pub use registry::{PrepareState, Registry, StmtEntry, StmtKey};
