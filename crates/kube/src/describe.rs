//! `describe`: a job's whole story, read once from what Kubernetes keeps (the object's marks, its
//! pods' ends, the events of both) and from its outcome record once they are gone.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kubeferry_core::ExecutionId;
use kubeferry_core::container::PodView;
use kubeferry_core::marks::{
    CANCEL_ANNOTATION, CANCELLED_BY_ANNOTATION, JOB_ID_LABEL, job_id_label_value, job_id_of,
};
use kubeferry_core::timeline::{Attempt, EventView, Sources, attempts_of, story};

use crate::cluster::Op;
use crate::error::Result;
use crate::kind::Answers;
use crate::replies::Description;

/// The job's story as of now. Reads, besides the status: the object (one GET, and its pods
/// listed to map it), the job's pods (one LIST by its job id's label) and the namespace's events
/// (one LIST); once the object or its pods are gone, its outcome record (one GET). Writes
/// nothing.
pub(crate) async fn describe<J: Answers>(jobs: &J, id: &ExecutionId) -> Result<Description> {
    let status = jobs.status(id).await?;
    let current = jobs.read(id).await?;
    let meta = current.as_ref().map(|current| &current.meta);
    let live_job_id = meta.and_then(job_id_of);
    let attempts = match &live_job_id {
        Some(job_id) => attempts(jobs, id, job_id).await?,
        None => Vec::new(),
    };
    // The record tells what the object or the pods no longer do.
    let record = if meta.is_none() || (attempts.is_empty() && status.is_terminal()) {
        jobs.records()
            .fetch(&id.namespace, id.kind, &id.name)
            .await?
    } else {
        None
    };
    let job_id = live_job_id.or_else(|| record.as_ref().and_then(|record| record.job_id.clone()));
    let created_at = meta
        .and_then(|meta| meta.creation_timestamp.as_ref().map(|t| t.0))
        .or_else(|| record.as_ref().and_then(|record| record.created_at));
    // The cancel's mark, or once the object is gone the record's word of who cancelled.
    let cancel = meta
        .and_then(|meta| {
            let annotations = meta.annotations.as_ref()?;
            let at = annotations.get(CANCEL_ANNOTATION)?;
            Some((
                at.parse::<Timestamp>().ok(),
                annotations.get(CANCELLED_BY_ANNOTATION).cloned(),
            ))
        })
        .or_else(|| {
            let record = record.as_ref()?;
            let by = record.cancelled_by.clone()?;
            Some((record.outcome.finished_at, Some(by)))
        });
    let attempts = match record {
        Some(record) if attempts.is_empty() => record.attempts,
        _ => attempts,
    };
    let events = events(jobs, id).await?;
    let sources = Sources {
        object: id.name.clone(),
        status: status.clone(),
        job_id: job_id.clone(),
        created_at,
        cancel,
        attempts,
        events,
    };
    Ok(Description {
        id: id.clone(),
        job_id,
        story: story(&sources, Timestamp::now()),
        status,
    })
}

/// Whether `name` is the job's object's or one of the objects it made (its pods, a JobSet's
/// Jobs, a Spark driver): their names start with the object's.
fn of_the_job(id: &ExecutionId, name: &str) -> bool {
    name == id.name
        || name
            .strip_prefix(id.name.as_str())
            .is_some_and(|rest| rest.starts_with('-'))
}

/// The job's attempts (its pods), oldest first.
async fn attempts<J: Answers>(jobs: &J, id: &ExecutionId, job_id: &str) -> Result<Vec<Attempt>> {
    let api: Api<Pod> = Api::namespaced(jobs.cluster().client().clone(), &id.namespace);
    let params =
        ListParams::default().labels(&format!("{JOB_ID_LABEL}={}", job_id_label_value(job_id)));
    let op = Op::collection("list", "pods", &id.namespace);
    let pods = jobs.cluster().call(&op, true, || api.list(&params)).await?;
    let views: Vec<PodView> = pods
        .items
        .iter()
        .filter(|pod| of_the_job(id, pod.metadata.name.as_deref().unwrap_or_default()))
        .map(PodView::from)
        .collect();
    Ok(attempts_of(&views))
}

/// The events of the job's object and of the objects it made.
async fn events<J: Answers>(jobs: &J, id: &ExecutionId) -> Result<Vec<EventView>> {
    let api: Api<Event> = Api::namespaced(jobs.cluster().client().clone(), &id.namespace);
    let params = ListParams::default();
    let op = Op::collection("list", "events", &id.namespace);
    let events = jobs.cluster().call(&op, true, || api.list(&params)).await?;
    Ok(events
        .items
        .iter()
        .filter(|event| {
            of_the_job(
                id,
                event.involved_object.name.as_deref().unwrap_or_default(),
            )
        })
        .map(|event| EventView {
            at: event
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| event.event_time.as_ref().map(|t| t.0))
                .or_else(|| event.first_timestamp.as_ref().map(|t| t.0))
                .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            object: event.involved_object.name.clone().unwrap_or_default(),
            reason: event.reason.clone().unwrap_or_default(),
            message: event.message.clone().unwrap_or_default(),
            warning: event.type_.as_deref() == Some("Warning"),
            count: event.count.and_then(|n| u32::try_from(n).ok()).unwrap_or(1),
            sequence: event
                .metadata
                .resource_version
                .as_deref()
                .and_then(|version| version.parse().ok()),
        })
        .collect())
}
