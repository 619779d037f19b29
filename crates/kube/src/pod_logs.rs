//! Container logs: tails cut on a UTF-8 boundary, and follows that survive dropped streams and
//! end when the container does. A follow of one attempt of several (a pod uid) never delivers
//! another attempt's lines: logs are read by pod name, so a read that may have reached the next
//! pod of that name is dropped, at the cost of the end of this attempt's log when the name
//! passes on in that very moment.

use std::time::Duration;

use futures::{AsyncBufReadExt, Stream, StreamExt};
use jiff::{Timestamp, TimestampRound, Unit};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, LogParams};
use kubeferry_core::marks::KeepLog;
use tokio::sync::mpsc;
use tracing::debug;

use crate::cluster::{Cluster, Op};
use crate::error::{Error, Result};

/// Which container's log to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTarget {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The pod's uid, when the pod read is one attempt of several: a pod of the same name made
    /// later (an operator's next driver) is another attempt, and a follow of this one ends when
    /// it finds that one in its place.
    pub uid: Option<String>,
}

/// How much of a log to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TailOptions {
    /// At most this many lines from the end.
    pub lines: Option<u64>,
    /// At most this many bytes from the end (cut so that no character is split).
    pub bytes: Option<u64>,
    /// The previous attempt's container (after a restart).
    pub previous: bool,
    /// Only the attempts of this index of an indexed job, or of this Job index of a JobSet's
    /// replicated job (`None`: every attempt).
    pub index: Option<u32>,
    /// Only the attempts of this replicated job of a JobSet (`None`: for a JobSet, its first
    /// replicated job).
    pub replica: Option<String>,
}

/// The end of a job's log, and what a reader must know about it: a log is never silently
/// empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tail {
    /// The end of the log; once the job's pod is gone, the last words kept with its outcome
    /// ([`kubeferry_core::ExecutionInfo::last_words`]).
    pub log: String,
    /// Why `log` is empty, or where it comes from when not from a container's log.
    pub warning: Option<String>,
    /// No container's log is there to read: the job's pods are gone, or none runs (`log` is
    /// then the last words kept with its outcome, or empty).
    pub gone: bool,
}

/// Reads the end of a container's log.
pub async fn tail(cluster: &Cluster, target: &LogTarget, options: &TailOptions) -> Result<String> {
    let api: Api<Pod> = Api::namespaced(cluster.client().clone(), &target.namespace);
    let params = LogParams {
        container: Some(target.container.clone()),
        tail_lines: options.lines.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        previous: options.previous,
        ..LogParams::default()
    };
    let op = Op::named("get", "pods/log", &target.namespace, &target.pod);
    let text = cluster
        .call_proxied(&op, || api.logs(&target.pod, &params))
        .await?;
    Ok(match options.bytes {
        Some(max) => last_bytes(&text, usize::try_from(max).unwrap_or(usize::MAX)).to_string(),
        None => text,
    })
}

pub(crate) use kubeferry_core::marks::last_bytes;

/// The end of the log of `target` that a job's outcome record keeps ([`KeepLog`]), read once
/// the job ended: one request. `None` when it cannot be read (the pod gone already, no
/// permission) or is empty: the kubelet's last words stand then.
pub(crate) async fn kept_tail(
    cluster: &Cluster,
    target: &LogTarget,
    keep: KeepLog,
) -> Option<String> {
    let options = TailOptions {
        lines: Some(u64::from(keep.lines)),
        ..TailOptions::default()
    };
    match tail(cluster, target, &options).await {
        Ok(text) => Some(keep.kept(&text).to_string()).filter(|text| !text.trim().is_empty()),
        Err(error) => {
            debug!(message = "could not read the log tail to keep with the outcome", namespace = %target.namespace, pod = %target.pod, %error);
            None
        }
    }
}

/// Timings of a follow.
#[derive(Clone, Debug)]
pub struct FollowOptions {
    /// Start with this many lines from the end (all when `None`).
    pub tail_lines: Option<u64>,
    /// How long to wait before re-opening a stream that ended while the container still runs.
    pub reopen_delay: Duration,
    /// How long a stream may stay silent before the container is looked at again (and the
    /// stream re-opened if it still runs).
    pub idle_recheck: Duration,
    /// Only the attempts of this index of an indexed job, or of this Job index of a JobSet's
    /// replicated job (`None`: every attempt).
    pub index: Option<u32>,
    /// Only the attempts of this replicated job of a JobSet (`None`: for a JobSet, its first
    /// replicated job).
    pub replica: Option<String>,
}

impl Default for FollowOptions {
    fn default() -> Self {
        Self {
            tail_lines: None,
            reopen_delay: Duration::from_millis(500),
            idle_recheck: Duration::from_secs(60),
            index: None,
            replica: None,
        }
    }
}

/// Follows a container's log, line by line (each with its newline), until the container has
/// terminated and its log is drained. A stream that ends early (rotation, a dropped connection)
/// is re-opened from the time of the last line read, skipping lines already delivered.
pub fn follow(
    cluster: Cluster,
    target: LogTarget,
    options: FollowOptions,
) -> impl Stream<Item = Result<String>> + Send + 'static {
    let (sender, receiver) = mpsc::channel(256);
    tokio::spawn(async move {
        if let Err(error) = follow_into(&cluster, &target, &options, &sender).await {
            let _ = sender.send(Err(error)).await;
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

async fn follow_into(
    cluster: &Cluster,
    target: &LogTarget,
    options: &FollowOptions,
    sender: &mpsc::Sender<Result<String>>,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(cluster.client().clone(), &target.namespace);
    let op = Op::named("get", "pods/log", &target.namespace, &target.pod);
    let mut resume = Resume::default();
    let mut opened = false;
    if target.uid.is_some()
        && matches!(
            container_terminated(cluster, &api, target).await?,
            Termination::PodGone | Termination::Replaced
        )
    {
        return Ok(()); // The attempt's pod is gone: it has no log left.
    }
    loop {
        if sender.is_closed() {
            return Ok(()); // The reader went away while the stream was silent.
        }
        let params = LogParams {
            container: Some(target.container.clone()),
            follow: true,
            timestamps: true,
            since_time: resume.since(),
            tail_lines: if resume.started() {
                None
            } else {
                options
                    .tail_lines
                    .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
            },
            ..LogParams::default()
        };
        // A stream may stay silent: the container has nothing to say, or the connection died
        // without closing (only a read timeout would tell, and it would cut healthy silent
        // streams too). After `idle_recheck` of silence the container is looked at: a
        // terminated one ends the follow, a running one gets its stream re-opened.
        let opening = cluster.open_proxied_stream(&op, || api.log_stream(&target.pod, &params));
        match tokio::time::timeout(options.idle_recheck, opening).await {
            Err(_) => {
                debug!(message = "log stream not answered yet; looking at the container", pod = %target.pod);
            }
            Ok(Ok(stream)) => {
                // The name may have passed to another attempt between the look that found this
                // one and the opening: then the stream may be that attempt's, read on its own.
                if replaced(cluster, &api, target).await? {
                    return Ok(());
                }
                opened = true;
                let mut lines = stream.lines();
                loop {
                    let line = match tokio::time::timeout(options.idle_recheck, lines.next()).await
                    {
                        Err(_) => {
                            debug!(message = "log stream silent; looking at the container", pod = %target.pod);
                            break;
                        }
                        Ok(None) => break,
                        Ok(Some(Ok(line))) => line,
                        Ok(Some(Err(error))) => {
                            debug!(message = "log stream broke; re-opening", pod = %target.pod, %error);
                            break;
                        }
                    };
                    if let Some(text) = resume.accept(&line)
                        && sender.send(Ok(format!("{text}\n"))).await.is_err()
                    {
                        return Ok(()); // The reader went away.
                    }
                }
            }
            // Re-opening after the pod went (an operator releasing a finished driver right
            // after its container ended): what was read is all there is.
            Ok(Err(Error::Api { code: 404, .. })) if opened => return Ok(()),
            Ok(Err(error)) => return Err(error),
        }
        match container_terminated(cluster, &api, target).await? {
            Termination::Running => tokio::time::sleep(options.reopen_delay).await,
            Termination::PodGone | Termination::Replaced => return Ok(()),
            Termination::Terminated => {
                // Drain what the broken stream may have missed, then stop.
                let params = LogParams {
                    container: Some(target.container.clone()),
                    timestamps: true,
                    since_time: resume.since(),
                    ..LogParams::default()
                };
                let rest = match cluster
                    .call_proxied(&op, || api.logs(&target.pod, &params))
                    .await
                {
                    Ok(rest) => rest,
                    // The pod went in the meantime (an operator releasing a finished driver):
                    // what was read is all there is.
                    Err(error) if error.is_not_found() => return Ok(()),
                    Err(error) => return Err(error),
                };
                if replaced(cluster, &api, target).await? {
                    // Read from whichever attempt held the name then: not delivered, since it
                    // may be the next attempt's log (followed on its own). A pod merely gone
                    // was this attempt's: what was read is delivered.
                    return Ok(());
                }
                for line in rest.lines() {
                    if let Some(text) = resume.accept(line)
                        && sender.send(Ok(format!("{text}\n"))).await.is_err()
                    {
                        return Ok(());
                    }
                }
                return Ok(());
            }
        }
    }
}

/// Whether a follow of one attempt (a target with a uid) finds another attempt's pod holding
/// the name.
async fn replaced(cluster: &Cluster, api: &Api<Pod>, target: &LogTarget) -> Result<bool> {
    Ok(target.uid.is_some()
        && matches!(
            container_terminated(cluster, api, target).await?,
            Termination::Replaced
        ))
}

enum Termination {
    Running,
    Terminated,
    PodGone,
    /// Another pod (another attempt) holds the name.
    Replaced,
}

async fn container_terminated(
    cluster: &Cluster,
    api: &Api<Pod>,
    target: &LogTarget,
) -> Result<Termination> {
    // A list by name rather than a get: kubeferry's Spark permissions grant `list` on pods,
    // and both kinds of jobs may read the same way.
    let op = Op::collection("list", "pods", &target.namespace);
    let params = ListParams::default().fields(&format!("metadata.name={}", target.pod));
    let found = cluster.call(&op, true, || api.list(&params)).await?;
    let Some(pod) = found.items.into_iter().next() else {
        return Ok(Termination::PodGone);
    };
    if target.uid.is_some() && pod.metadata.uid != target.uid {
        return Ok(Termination::Replaced);
    }
    let status = pod.status.unwrap_or_default();
    let phase_done = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    let terminated = status
        .container_statuses
        .unwrap_or_default()
        .iter()
        .find(|c| c.name == target.container)
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.terminated.is_some());
    Ok(if terminated || phase_done {
        Termination::Terminated
    } else {
        Termination::Running
    })
}

/// Where a follow is, so that a re-opened stream continues after the last delivered line.
///
/// Lines are requested with timestamps. The server takes `sinceTime` in whole seconds, so a
/// re-opened stream starts at the second of the last line and repeats the lines of that second
/// already delivered; those are skipped by counting them.
#[derive(Debug, Default)]
pub(crate) struct Resume {
    last: Option<Timestamp>,
    delivered_at_last: usize,
    replay_at_last: usize,
    replaying: bool,
}

impl Resume {
    fn started(&self) -> bool {
        self.last.is_some()
    }

    /// The `sinceTime` for re-opening: the last line's time, truncated to the second.
    pub fn since(&mut self) -> Option<Timestamp> {
        let last = self.last?;
        self.replaying = true;
        self.replay_at_last = 0;
        last.round(
            TimestampRound::new()
                .smallest(Unit::Second)
                .mode(jiff::RoundMode::Trunc),
        )
        .ok()
    }

    /// Takes one timestamped line from the server; returns its text unless it was delivered
    /// before.
    pub fn accept<'a>(&mut self, line: &'a str) -> Option<&'a str> {
        let Some((time, text)) = split_timestamp(line) else {
            // Not timestamped (should not happen): deliver it as it is.
            return Some(line);
        };
        match self.last {
            Some(last) if self.replaying && time < last => None,
            Some(last) if self.replaying && time == last => {
                self.replay_at_last += 1;
                if self.replay_at_last <= self.delivered_at_last {
                    None
                } else {
                    self.delivered_at_last += 1;
                    Some(text)
                }
            }
            Some(last) if time == last => {
                self.delivered_at_last += 1;
                Some(text)
            }
            _ => {
                self.replaying = false;
                self.last = Some(time);
                self.delivered_at_last = 1;
                Some(text)
            }
        }
    }
}

/// Splits `2026-01-02T03:04:05.123456789Z text` into its time and text.
pub(crate) fn split_timestamp(line: &str) -> Option<(Timestamp, &str)> {
    let (time, text) = line.split_once(' ').unwrap_or((line, ""));
    let time: Timestamp = time.parse().ok()?;
    Some((time, text))
}

#[cfg(test)]
mod tests;
