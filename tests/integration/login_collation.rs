//! Login collations before the backend was ever reached (issue 16, item
//! 12): a MySQL 8 client's collation 255 (`utf8mb4_0900_ai_ci`, unknown to
//! MariaDB) gets the server's defaults as a direct login would, instead of
//! being kept and replayed (1273 on every statement of the session).

use crate::common;

use std::sync::{Arc, Mutex};

use common::raw::{RawConn, Response};
use common::{MariaDb, Proxy, free_port};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A TCP forwarder to the test server that starts closed (connections
/// refused) and is opened later.
struct LateGate {
    port: u16,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl LateGate {
    fn closed() -> LateGate {
        LateGate {
            port: free_port(),
            task: Arc::default(),
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    async fn open(&self, target: String) {
        let listener = TcpListener::bind(self.addr()).await.expect("bind gate");
        let t = tokio::spawn(async move {
            while let Ok((mut c, _)) = listener.accept().await {
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(mut s) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut c, &mut s).await;
                    }
                });
            }
        });
        *self.task.lock().expect("gate lock") = Some(t);
    }
}

impl Drop for LateGate {
    fn drop(&mut self) {
        if let Ok(mut t) = self.task.lock()
            && let Some(t) = t.take()
        {
            t.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql8_collation_before_the_backend_was_reached() {
    let db = MariaDb::shared();
    let gate = LateGate::closed();
    let p = Proxy::builder(db)
        .with(|c| {
            c.backend.address = gate.addr();
            c.backend.connect_timeout_ms = 300;
        })
        .start()
        .await;
    assert!(
        p.shared.pool.server_info().collations.is_none(),
        "the backend must not have been reached yet"
    );
    let addr = p.addr.to_string();
    let mut c =
        RawConn::try_connect_with(&addr, "app", "secret", None, common::raw::BASE_CAPS, 255)
            .await
            .expect("login without a backend");
    // The collation of the greeting the client got is what a server that
    // does not know the id gives the session.
    let greeting = u16::from(p.shared.pool.server_info().collation);
    gate.open(db.addr()).await;
    for _ in 0..2 {
        match c
            .query("SELECT @@collation_connection, @@character_set_client, 1")
            .await
        {
            Response::Rows(r) => {
                let rows = r.text_rows();
                let want = mysql_common::collations::Collation::resolve(
                    mysql_common::collations::CollationId::from(greeting),
                );
                assert_eq!(rows[0][0].as_deref(), Some(want.collation), "{rows:?}");
                assert_eq!(rows[0][1].as_deref(), Some(want.charset), "{rows:?}");
            }
            other => panic!("statement failed: {}", common::raw::brief(&other)),
        }
    }
    c.quit().await;
}
