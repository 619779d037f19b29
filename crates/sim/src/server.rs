//! The HTTP/1.1 server: accepts connections on 127.0.0.1, authenticates, counts, applies fault
//! rules and authorizes every request before routing it; can go unreachable for a while or
//! restart (dropping every connection) without losing objects.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

use crate::api::request::RequestInfo;
use crate::api::{self, StallWatch};
use crate::auth::rbac::{self, Attributes};
use crate::error::ApiError;
use crate::faults::{FaultAction, RequestFacts, SocketCommand};
use crate::state::State;

const PUBLIC_PATHS: &[&str] = &["/version", "/version/", "/healthz", "/livez", "/readyz"];

/// Handles one request; an `Err` makes hyper drop the connection without answering.
async fn handle(
    state: Arc<State>,
    router: Router,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, std::io::Error> {
    let info = RequestInfo::parse(req.method(), req.uri());
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let identity = match state.auth.authenticate(authorization) {
        Ok(id) => id,
        Err(_) => return Ok(ApiError::unauthorized().into_response()),
    };
    let anonymous = identity
        .groups
        .iter()
        .any(|g| g == "system:unauthenticated");
    if anonymous && !PUBLIC_PATHS.contains(&info.path.as_str()) {
        return Ok(ApiError::unauthorized().into_response());
    }
    let facts = RequestFacts {
        verb: info.verb.clone(),
        resource: info.resource_label(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        user: identity.user.clone(),
    };
    let admin_path = info.path.starts_with("/sim/") || info.path == "/sim";
    if !admin_path {
        state.counters.record(&facts);
    }
    let verdict = if admin_path {
        Default::default()
    } else {
        state.faults.check(&facts)
    };
    if !verdict.latency.is_zero() {
        tokio::time::sleep(verdict.latency).await;
    }
    if !verdict.holds.is_empty() {
        state.faults.wait_released(&verdict.holds).await;
    }
    let mut lose_response = false;
    match verdict.action {
        Some(FaultAction::Error {
            code,
            message,
            retry_after_seconds,
        }) => return Ok(ApiError::from_code(code, message, retry_after_seconds).into_response()),
        Some(FaultAction::DropConnection) => {
            return Err(std::io::Error::other("connection dropped by a fault rule"));
        }
        Some(FaultAction::LoseResponse) => lose_response = true,
        Some(FaultAction::StallWatch) => {
            req.extensions_mut().insert(StallWatch(true));
        }
        Some(FaultAction::Latency { .. } | FaultAction::Hold) | None => {}
    }
    if !admin_path {
        let attrs = if info.is_resource {
            Attributes {
                verb: info.verb.clone(),
                group: info.group.clone(),
                resource: info.resource.clone(),
                subresource: info.subresource.clone(),
                namespace: info.namespace.clone(),
                name: info.name.clone(),
                path: String::new(),
            }
        } else {
            Attributes {
                verb: info.verb.clone(),
                path: info.path.clone(),
                ..Attributes::default()
            }
        };
        let decision = rbac::authorize(&state.store, state.config.rbac, &identity, &attrs);
        if !decision.allowed {
            let gr = crate::resources::GroupResource::new(&info.group, &info.resource);
            let message = rbac::forbidden_message(&identity, &attrs);
            return Ok(ApiError::forbidden(&gr, &info.name, message).into_response());
        }
    }
    req.extensions_mut().insert(info);
    req.extensions_mut().insert(identity);
    let response = match router.oneshot(req.map(Body::new)).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    if lose_response {
        // The request took effect; the client never hears about it.
        return Err(std::io::Error::other("response lost by a fault rule"));
    }
    Ok(response)
}

async fn serve_io<I>(state: Arc<State>, router: Router, io: I, mut close: watch::Receiver<bool>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| handle(state.clone(), router.clone(), req));
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::select! {
        // A server going down answers nothing more, even a request already on the socket.
        biased;
        _ = close.changed() => {}
        _ = conn => {}
    }
}

/// One connection: TLS when it opens with a TLS handshake (and TLS is on), else plain HTTP.
async fn connection(
    state: Arc<State>,
    router: Router,
    stream: TcpStream,
    close: watch::Receiver<bool>,
) {
    let mut first = [0u8; 1];
    let is_tls = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16);
    match (&state.tls, is_tls) {
        (Some(tls), true) => {
            let acceptor = tls.acceptor.clone();
            match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                Ok(Ok(tls_stream)) => serve_io(state, router, tls_stream, close).await,
                Ok(Err(error)) => tracing::debug!(message = "TLS handshake failed", %error),
                Err(_) => tracing::debug!(message = "TLS handshake timed out"),
            }
        }
        _ => serve_io(state, router, stream, close).await,
    }
}

async fn bind(addr: SocketAddr) -> TcpListener {
    let mut delay = Duration::from_millis(5);
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(error) => {
                tracing::warn!(message = "cannot listen again yet", %addr, %error);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// Serves until `shutdown` turns true.
pub async fn serve(state: Arc<State>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let router = api::router(state.clone());
    let Some(mut commands) = state.control.take_commands() else {
        tracing::warn!(message = "not serving: another accept loop holds the server's commands");
        return;
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(error) => {
            tracing::warn!(message = "listener has no address", %error);
            return;
        }
    };
    let mut listener = Some(listener);
    loop {
        // Every connection of this listening period closes when it ends.
        let (close_tx, close_rx) = watch::channel(false);
        let Some(current) = listener.take() else {
            return;
        };
        let (mut down_for, forget_watch_history) = loop {
            tokio::select! {
                _ = shutdown.changed() => {
                    close_tx.send_replace(true);
                    return;
                }
                command = commands.recv() => match command {
                    Some(SocketCommand::Down { down_for, forget_watch_history }) => {
                        break (down_for, forget_watch_history);
                    }
                    Some(SocketCommand::Up) => continue,
                    None => {
                        close_tx.send_replace(true);
                        return;
                    }
                },
                accepted = current.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    let router = router.clone();
                    let close = close_rx.clone();
                    tokio::spawn(connection(state, router, stream, close));
                }
            }
        };
        // Connections close before the port does: once a new connection is refused, no open
        // one answers either.
        close_tx.send_replace(true);
        drop(current);
        if forget_watch_history {
            state.store.compact();
        }
        while !down_for.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(down_for) => break,
                command = commands.recv() => match command {
                    Some(SocketCommand::Down { down_for: more, forget_watch_history }) => {
                        if forget_watch_history {
                            state.store.compact();
                        }
                        down_for = more;
                    }
                    Some(SocketCommand::Up) => break,
                    None => return,
                },
                _ = shutdown.changed() => return,
            }
        }
        listener = Some(bind(addr).await);
    }
}
