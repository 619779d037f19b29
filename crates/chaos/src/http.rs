//! A small client of the service's JSON API, turning each answer into what the checker records.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::check::{Said, Seen};

/// The client (one connection pool for every replica).
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

/// A raw answer: status and JSON body (`Null` when not JSON).
pub type Raw = (u16, Value);

impl Http {
    /// A client whose requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Http {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(1)));
        Http {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(5))
                .build(connector),
            timeout,
        }
    }

    /// One request.
    pub async fn call(
        &self,
        addr: SocketAddr,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Raw, String> {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path}"));
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        let body = body
            .map(|b| Bytes::from(serde_json::to_vec(b).unwrap_or_default()))
            .unwrap_or_default();
        let request = builder.body(Full::new(body)).map_err(|e| e.to_string())?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("request failed: {e}"))?;
            let status = response.status().as_u16();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("body failed: {e}"))?
                .to_bytes();
            Ok((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| "timed out".to_string())?
    }
}

impl Http {
    /// Follows a Server-Sent Events stream until `on_event` says stop (true), the stream ends,
    /// or `deadline`; `on_event` gets each event's name and JSON data. Ok when it stopped on
    /// `on_event`'s word.
    pub async fn follow_events(
        &self,
        addr: SocketAddr,
        path: &str,
        deadline: tokio::time::Instant,
        mut on_event: impl FnMut(&str, &Value) -> bool,
    ) -> Result<(), String> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(format!("http://{addr}{path}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let follow = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("request failed: {e}"))?;
            if response.status() != 200 {
                return Err(format!("answered {}", response.status()));
            }
            let mut body = response.into_body();
            let mut buffer = String::new();
            let (mut name, mut data) = (String::new(), String::new());
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| format!("stream failed: {e}"))?;
                let Some(chunk) = frame.data_ref() else {
                    continue;
                };
                buffer.push_str(&String::from_utf8_lossy(chunk));
                while let Some(end) = buffer.find('\n') {
                    let line: String = buffer.drain(..=end).collect();
                    let line = line.trim_end_matches(['\r', '\n']);
                    if line.is_empty() {
                        let value = serde_json::from_str(&data).unwrap_or(Value::Null);
                        if !name.is_empty() && on_event(&name, &value) {
                            return Ok(());
                        }
                        name.clear();
                        data.clear();
                    } else if let Some(rest) = line.strip_prefix("event:") {
                        name = rest.trim().to_string();
                    } else if let Some(rest) = line.strip_prefix("data:") {
                        data.push_str(rest.trim_start());
                    }
                }
            }
            Err("the stream ended".into())
        };
        tokio::time::timeout_at(deadline, follow)
            .await
            .map_err(|_| "timed out".to_string())?
    }
}

/// A `JobInfo` as the checker records it.
pub fn seen(info: &Value) -> Option<Seen> {
    Some(Seen {
        state: info.get("state")?.as_str()?.to_string(),
        reason: info
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        exit_code: info.get("exitCode").and_then(Value::as_i64),
        failure_class: info
            .get("failureClass")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

fn error(status: u16, body: &Value) -> Said {
    let code = body
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    if status == 404 && code == "no_such_job" {
        Said::NoSuchJob
    } else {
        Said::Error(status, code)
    }
}

/// What a status answer said.
pub fn status_said(answer: Result<Raw, String>) -> Said {
    match answer {
        Ok((200, body)) => seen(&body).map_or(Said::Error(200, "unreadable".into()), Said::Job),
        Ok((status, body)) => error(status, &body),
        Err(why) => Said::NoAnswer(why),
    }
}

/// What a cancel answer said.
pub fn cancel_said(answer: Result<Raw, String>) -> Said {
    match answer {
        Ok((202, body)) => body
            .get("job")
            .and_then(seen)
            .map_or(Said::Error(202, "unreadable".into()), Said::Job),
        Ok((status, body)) => error(status, &body),
        Err(why) => Said::NoAnswer(why),
    }
}

/// What a submission answer said.
pub fn submit_said(answer: Result<Raw, String>) -> Said {
    match answer {
        Ok((200 | 201, body)) => body
            .get("id")
            .and_then(Value::as_str)
            .map_or(Said::Error(201, "unreadable".into()), |id| {
                Said::Submitted(id.to_string())
            }),
        Ok((status, body)) => error(status, &body),
        Err(why) => Said::NoAnswer(why),
    }
}
