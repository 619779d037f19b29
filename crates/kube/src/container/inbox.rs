//! The handle of a namespace's settler (`settler.rs`): what the tracker keeps beside the
//! watches, and what the settler's task is started with.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubeferry_core::container::{JobView, MappingConfig, PodView};
use tokio::sync::{mpsc, oneshot};

use crate::cluster::Cluster;
use crate::error::Result;
use crate::kind::Seen;
use crate::records::Records;
use crate::settling::JobStates;
use crate::tracker::LastReported;

/// What the settler of a namespace needs besides its watches.
#[derive(Clone)]
pub(crate) struct SettlerContext {
    pub(crate) cluster: Cluster,
    pub(crate) mapping: MappingConfig,
    pub(crate) refusal_freshness: Duration,
    /// How soon a write that failed is tried again.
    pub(crate) retry_interval: Duration,
    pub(crate) janitor_interval: Duration,
    pub(crate) reported: Arc<Mutex<LastReported>>,
    /// The outcome records, kept for every job that ends.
    pub(crate) records: Arc<Records>,
}

/// The handle of a namespace's settler: the task ends once its watches are dropped.
pub(crate) struct Settler {
    requests: mpsc::UnboundedSender<Request>,
    /// The namespace's jobs by state, as the settler last mapped them.
    pub(crate) states: Arc<JobStates>,
}

/// A status query that found an outcome due: the settler records it now rather than at its
/// timer (the answer waits for the write, so that no replica reports an outcome that is not
/// on the Job yet). The Job may be gone already: a deleted Job's outcome is recorded too.
pub(crate) struct Request {
    pub(crate) observed: Seen<JobView>,
    pub(crate) pods: Vec<PodView>,
    pub(crate) done: oneshot::Sender<Result<()>>,
}

/// The requests a settler has yet to take; given to its task once its watches are built.
pub(crate) struct Inbox {
    pub(crate) requests: mpsc::UnboundedReceiver<Request>,
    pub(crate) states: Arc<JobStates>,
}

/// A settler's handle and inbox, before its task is started.
pub(crate) fn channel() -> (Settler, Inbox) {
    let (requests, received) = mpsc::unbounded_channel();
    let states = Arc::new(JobStates::default());
    (
        Settler {
            requests,
            states: states.clone(),
        },
        Inbox {
            requests: received,
            states,
        },
    )
}

impl Settler {
    /// Has the settler carry out what the mapping of the Job as `observed`, with `pods`, asks
    /// for now; returns once it did, or with why it could not. `None` if the settler is not
    /// running (it runs as long as its watches).
    pub(crate) async fn settle_now(
        &self,
        observed: Seen<JobView>,
        pods: Vec<PodView>,
    ) -> Option<Result<()>> {
        let (done, answer) = oneshot::channel();
        self.requests
            .send(Request {
                observed,
                pods,
                done,
            })
            .ok()?;
        answer.await.ok()
    }
}
