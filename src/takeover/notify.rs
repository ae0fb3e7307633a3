//! systemd's notification socket (`NOTIFY_SOCKET`, set for `Type=notify`
//! units): `READY=1` once listening and, after a hand-over, `MAINPID=` so
//! that systemd follows the new process instead of stopping the unit when
//! the old one exits (needs `NotifyAccess=all`). Does nothing elsewhere.

use std::os::unix::net::UnixDatagram;

use tracing::debug;

/// Sends `READY=1` and this process's pid as the unit's main pid.
pub fn ready() {
    send(&format!("READY=1\nMAINPID={}\n", std::process::id()));
}

/// Sends `state` to `NOTIFY_SOCKET` if set; failures are logged at debug.
pub fn send(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let r = UnixDatagram::unbound().and_then(|s| {
        let bytes = path.as_encoded_bytes();
        if let Some(name) = bytes.strip_prefix(b"@") {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            s.send_to_addr(state.as_bytes(), &addr)
        } else {
            s.send_to(state.as_bytes(), &path)
        }
    });
    if let Err(e) = r {
        debug!(error = %e, "systemd notification failed");
    }
}
