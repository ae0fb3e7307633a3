//! Who is logging in: the `[[users]]` entry of the name, or else (with
//! `[server_users] enabled`) the server account row for the client's
//! address, and the password check against it. Shared by the login and
//! COM_CHANGE_USER.
//!
//! A server account logs in only with `mysql_native_password`: the
//! client's response yields SHA1(password), which is checked against the
//! stored SHA1(SHA1(password)) and then is what this user's own credential
//! pool logs in to the backend with (the cleartext is never known). Other
//! plugins, accounts without a password (unless allowed), locked accounts
//! and expired passwords are refused with the server's errors.

use std::sync::Arc;

use super::auth::{Credential, native_stage1};
use super::handshake::{HandshakeError, authenticate};
use super::{Shared, User};
use crate::config::AuthPluginName;
use crate::protocol::errors;
use crate::protocol::packets::ErrPacket;
use crate::server_users::account::{Account, AccountAuth};
use crate::server_users::{self, Lookup, ServerUsers};
use crate::wire::{PacketIo, Peer};

/// The client side of one authentication attempt.
pub(crate) struct Attempt<'a> {
    /// Login name.
    pub name: &'a str,
    /// Who the client is (`None` when unknown: server users are refused).
    pub peer: Option<Peer>,
    /// The plugin the client's response is for.
    pub client_plugin: &'a [u8],
    /// The plugin the challenge was issued for.
    pub challenged: AuthPluginName,
    /// The challenge.
    pub nonce: &'a [u8; 20],
    /// The client's response.
    pub response: Vec<u8>,
}

/// Authenticates `a` (with auth switch when needed): the logged-in user, or
/// the error the client gets (sent by the caller at `seq`).
pub(crate) async fn authenticate_user(
    shared: &Shared,
    io: &mut PacketIo,
    seq: &mut u8,
    a: Attempt<'_>,
) -> Result<Result<Arc<User>, ErrPacket>, HandshakeError> {
    // The host the server names in "Access denied for 'user'@'host'": a
    // socket client is `localhost`.
    let host = match a.peer {
        Some(Peer::Tcp(addr)) => addr.ip().to_string(),
        Some(Peer::Unix) => "localhost".to_string(),
        None => String::new(),
    };
    let denied = |used: bool| errors::access_denied(a.name, &host, used);
    let users = shared.users.load_full();
    if let Some((_, user)) = users.find(a.name) {
        let out = authenticate(
            io,
            seq,
            user,
            a.client_plugin,
            a.challenged,
            a.nonce,
            a.response,
        )
        .await?;
        return Ok(if out.ok {
            Ok(Arc::new(user.clone()))
        } else {
            Err(denied(out.used_password))
        });
    }
    let used = !a.response.is_empty();
    let (Some(su), Some(peer)) = (shared.server_users.as_deref(), a.peer) else {
        return Ok(Err(denied(used)));
    };
    let Lookup::Found(found) = su.accounts(a.name, false).await else {
        return Ok(Err(denied(used)));
    };
    let Some(mut account) = server_users::select(&found, peer).cloned() else {
        return Ok(Err(denied(used)));
    };
    let nonce = a.nonce;
    let response = match account.auth {
        AccountAuth::Native(h2) => {
            // Switches a client that answered for another plugin.
            let user = User {
                name: a.name.to_string(),
                credential: native_only(h2),
                pool: 0,
                admin: false,
                enabled: true,
            };
            authenticate(
                io,
                seq,
                &user,
                a.client_plugin,
                a.challenged,
                nonce,
                a.response,
            )
            .await?
            .response
        }
        _ => a.response,
    };
    let used = !response.is_empty();
    let mut stage1 = decide(&account, nonce, &response, su.allow_no_password);
    if stage1.is_none() {
        // The account may have changed on the server since the cached
        // read (new password, recreated): read again, at most once per
        // negative TTL.
        if let Some(fresh) = reread(su, a.name, peer, &account).await {
            stage1 = decide(&fresh, nonce, &response, su.allow_no_password);
            account = fresh;
        }
    }
    let Some(stage1) = stage1 else {
        return Ok(Err(denied(used)));
    };
    if account.locked {
        return Ok(Err(server_users::account_locked()));
    }
    if account.expired {
        return Ok(Err(server_users::password_expired()));
    }
    let pool = shared.pool.register(a.name, stage1);
    tracing::debug!(pool, "server user logged in");
    Ok(Ok(Arc::new(User {
        name: a.name.to_string(),
        credential: match account.auth {
            AccountAuth::Native(h2) => native_only(h2),
            _ => Credential {
                native: None,
                sha2: None,
                empty: true,
            },
        },
        pool,
        admin: false,
        enabled: true,
    })))
}

fn native_only(h2: [u8; 20]) -> Credential {
    Credential {
        native: Some(h2),
        sha2: None,
        empty: false,
    }
}

/// Whether `response` to `nonce` logs in to `account`: `Some(backend
/// secret)` (SHA1(password), or none for an account without password).
fn decide(
    account: &Account,
    nonce: &[u8; 20],
    response: &[u8],
    allow_no_password: bool,
) -> Option<Option<[u8; 20]>> {
    match &account.auth {
        AccountAuth::Native(h2) => native_stage1(h2, nonce, response).map(Some),
        AccountAuth::NoPassword if allow_no_password && response.is_empty() => Some(None),
        AccountAuth::NoPassword | AccountAuth::Unsupported(_) => None,
    }
}

/// The account row for `peer` read again, when it differs from `old`.
async fn reread(su: &ServerUsers, name: &str, peer: Peer, old: &Account) -> Option<Account> {
    let Lookup::Found(found) = su.accounts(name, true).await else {
        return None;
    };
    let fresh = server_users::select(&found, peer)?.clone();
    (fresh != *old).then_some(fresh)
}
