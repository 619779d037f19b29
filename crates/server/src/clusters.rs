//! Connecting to the configured clusters: a kubeconfig context, an API URL with a CA and a
//! token file that is re-read when it changes, or the pod's service account. Every client
//! counts its Kubernetes API requests for `/metrics`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::SystemTime;

use axum::http::{HeaderValue, Method, Request, Response, header};
use futures::future::BoxFuture;
use kube::client::{AuthError, Body};
use kube::config::Kubeconfig;
use kubeferry_kube::{Cluster, ClusterSettings, KubeconfigLocation};
use tracing::warn;

use crate::config::{ClusterConfig, ClusterSource};

/// One kind of Kubernetes API request, as counted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKind {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// `discovery` for paths outside resources.
    pub verb: &'static str,
    /// `jobs.batch`, `pods`, `pods/log`, ...; empty for discovery.
    pub resource: String,
}

/// How one request ended: the HTTP status, or `None` when no response came.
pub type Answer = Option<u16>;

/// Counts of the API requests a cluster's client made.
#[derive(Debug, Default)]
pub struct ApiStats {
    counts: Mutex<BTreeMap<(RequestKind, Answer), u64>>,
}

impl ApiStats {
    fn record(&self, kind: RequestKind, answer: Answer) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        *counts.entry((kind, answer)).or_default() += 1;
    }

    /// Every count so far, by request kind and answer.
    pub fn snapshot(&self) -> BTreeMap<(RequestKind, Answer), u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// What a request to the API server does, from its method and path.
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> RequestKind {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... (core group) or /apis/<group>/<version>/...
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => {
            return RequestKind {
                verb: "discovery",
                resource: String::new(),
            };
        }
    };
    let rest = match rest {
        ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
        other => other,
    };
    let (resource, name, subresource) = match rest {
        [] => {
            return RequestKind {
                verb: "discovery",
                resource: String::new(),
            };
        }
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    let mut resource = resource.to_string();
    if let Some(sub) = subresource {
        resource = format!("{resource}/{sub}");
    }
    if !group.is_empty() {
        resource = format!("{resource}.{group}");
    }
    RequestKind { verb, resource }
}

/// A bearer token read from a file, re-read whenever the file changes (a rotated service
/// account token, a renewed secret). The token is never logged.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    cached: Mutex<Option<CachedToken>>,
}

#[derive(Debug, Clone)]
struct CachedToken {
    modified: Option<SystemTime>,
    len: u64,
    header: HeaderValue,
}

impl TokenFile {
    /// A token file; read on first use.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            cached: Mutex::new(None),
        }
    }

    /// The `Authorization` header value: the cached one while the file is unchanged, else the
    /// file's new content. A file that cannot be read keeps the last token in use.
    pub fn header(&self) -> Result<HeaderValue, std::io::Error> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let metadata = std::fs::metadata(&self.path);
        if let (Ok(metadata), Some(current)) = (&metadata, cached.as_ref())
            && metadata.modified().ok() == current.modified
            && metadata.len() == current.len
        {
            return Ok(current.header.clone());
        }
        let read = metadata.and_then(|metadata| {
            let text = std::fs::read_to_string(&self.path)?;
            Ok((metadata, text))
        });
        match read {
            Ok((metadata, text)) => {
                let token = text.trim();
                let mut header =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "the token file holds characters a header cannot carry",
                        )
                    })?;
                header.set_sensitive(true);
                *cached = Some(CachedToken {
                    modified: metadata.modified().ok(),
                    len: metadata.len(),
                    header: header.clone(),
                });
                Ok(header)
            }
            Err(error) => match cached.as_ref() {
                Some(current) => {
                    warn!(message = "cannot re-read the Kubernetes token file; using the last token read", file = %self.path.display(), %error);
                    Ok(current.header.clone())
                }
                None => Err(error),
            },
        }
    }
}

/// Sends through a kube client, adding a token read from a file and counting every request.
#[derive(Clone)]
struct Instrumented {
    client: kube::Client,
    stats: Arc<ApiStats>,
    token: Option<Arc<TokenFile>>,
}

impl tower::Service<Request<Body>> for Instrumented {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner client buffers; readiness is checked when it sends.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let kind = classify(
            request.method(),
            request.uri().path(),
            request.uri().query(),
        );
        let client = self.client.clone();
        let stats = self.stats.clone();
        let token = self
            .token
            .as_ref()
            .map(|file| (file.header(), file.path.clone()));
        Box::pin(async move {
            match token {
                Some((Ok(value), _)) => {
                    request.headers_mut().insert(header::AUTHORIZATION, value);
                }
                Some((Err(error), path)) => {
                    stats.record(kind, None);
                    return Err(kube::Error::Auth(AuthError::ReadTokenFile(error, path)));
                }
                None => {}
            }
            let result = client.send(request).await;
            stats.record(kind, result.as_ref().ok().map(|r| r.status().as_u16()));
            result
        })
    }
}

/// A connected cluster and the counts of its API requests.
#[derive(Clone, Debug)]
pub struct Connected {
    /// The cluster.
    pub cluster: Cluster,
    /// Its API requests.
    pub stats: Arc<ApiStats>,
}

/// Why a cluster could not be connected.
#[derive(Debug, thiserror::Error)]
#[error("clusters[{index}]: {message}")]
pub struct ConnectError {
    /// The cluster's index in the configuration.
    pub index: usize,
    /// What went wrong.
    pub message: String,
}

/// Connects to one configured cluster.
pub async fn connect(
    index: usize,
    config: &ClusterConfig,
    settings: ClusterSettings,
) -> Result<Connected, ConnectError> {
    let fail = |message: String| ConnectError { index, message };
    let (cluster, token) = match &config.source {
        ClusterSource::Kubeconfig { path, context } => {
            let location = KubeconfigLocation::find(path.as_deref()).ok_or_else(|| {
                fail("no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config); give kubeconfig, apiUrl or inCluster".into())
            })?;
            let kubeconfig = location.read().map_err(|e| fail(e.to_string()))?;
            let cluster = Cluster::from_kubeconfig(
                kubeconfig,
                context.as_deref(),
                config.name.as_deref(),
                settings,
            )
            .await
            .map_err(|e| fail(e.to_string()))?;
            (cluster, None)
        }
        ClusterSource::ApiUrl {
            url,
            ca_file,
            token_file,
        } => {
            let name = config.name.as_deref().unwrap_or("cluster");
            let kubeconfig = api_url_kubeconfig(name, url, ca_file.as_deref())
                .map_err(|e| fail(format!("apiUrl: {e}")))?;
            let cluster = Cluster::from_kubeconfig(kubeconfig, None, Some(name), settings)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let token = match token_file {
                Some(path) => {
                    let file = TokenFile::new(path);
                    file.header()
                        .map_err(|e| fail(format!("tokenFile {}: {e}", path.display())))?;
                    Some(Arc::new(file))
                }
                None => None,
            };
            (cluster, token)
        }
        ClusterSource::InCluster => {
            let name = config.name.as_deref().unwrap_or("in-cluster");
            let kube_config = kube::Config::incluster()
                .map_err(|e| fail(format!("inCluster: not running in a pod? {e}")))?;
            let cluster = Cluster::from_config(name, kube_config, settings)
                .map_err(|e| fail(e.to_string()))?;
            (cluster, None)
        }
    };
    let stats = Arc::new(ApiStats::default());
    let cluster = {
        let stats = stats.clone();
        cluster.map_client(move |client| {
            let namespace = client.default_namespace().to_string();
            kube::Client::new(
                Instrumented {
                    client,
                    stats,
                    token,
                },
                namespace,
            )
        })
    };
    Ok(Connected { cluster, stats })
}

/// A kubeconfig for an API URL and CA file, with no credentials of its own (the token file is
/// added to each request).
fn api_url_kubeconfig(name: &str, url: &str, ca_file: Option<&Path>) -> Result<Kubeconfig, String> {
    let mut cluster = serde_json::json!({ "server": url });
    if let Some(ca) = ca_file {
        let ca = ca
            .to_str()
            .ok_or_else(|| format!("caFile {} is not valid UTF-8", ca.display()))?;
        cluster["certificate-authority"] = serde_json::Value::from(ca);
    }
    let document = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": cluster }],
        "users": [{ "name": name, "user": {} }],
        "contexts": [{ "name": name, "context": { "cluster": name, "user": name } }],
        "current-context": name,
    });
    serde_json::from_value(document).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
