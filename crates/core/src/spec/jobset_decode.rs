//! Decoding a `kind: JobSet` file's tree into a [`JobSetJob`], with the same reporting as
//! container jobs: types, unknown fields (with a suggestion) and missing fields, each at its
//! place.

use super::decode::{Decoder, Hints, PROCESS_FIELDS, PROCESS_HINTS, join};
use super::error::Path;
use super::jobset_model::{
    JobSetJob, JobSetSuccessPolicy, ReplicatedJob, StartupOrder, SuccessOperator,
};
use super::tree::Node;

const JOBSET_FIELDS: &[&str] = &[
    "kind",
    "name",
    "namespace",
    "imagePullSecrets",
    "serviceAccount",
    "replicatedJobs",
    "failurePolicy",
    "successPolicy",
    "startupPolicy",
    "network",
    "ttlAfterFinished",
    "labels",
    "annotations",
    "keepLog",
];
const REPLICATED_JOB_FIELDS: &[&str] = &join::<11>(&[
    &["name", "replicas", "image", "imagePullPolicy"],
    &PROCESS_FIELDS,
]);
const FAILURE_POLICY_FIELDS: &[&str] = &["maxRestarts"];
const SUCCESS_POLICY_FIELDS: &[&str] = &["operator", "targetReplicatedJobs"];
const NETWORK_FIELDS: &[&str] = &["enableDNSHostnames"];

/// Names from JobSet manifests and container job files that users reach for, and what this
/// format calls them.
const JOBSET_HINTS: Hints = &[
    ("replicatedJobs", PROCESS_HINTS),
    (
        "",
        &[
            (
                "spec",
                "the fields directly at the top (replicatedJobs, failurePolicy, ...)",
            ),
            ("replicas", "replicatedJobs[].replicas"),
            ("jobs", "replicatedJobs"),
            ("image", "replicatedJobs[].image"),
            ("command", "replicatedJobs[].command"),
            ("args", "replicatedJobs[].args"),
            ("env", "replicatedJobs[].env"),
            ("resources", "replicatedJobs[].resources"),
            ("maxRestarts", "failurePolicy.maxRestarts"),
            ("retries", "failurePolicy.maxRestarts"),
            ("startupPolicyOrder", "startupPolicy"),
            ("enableDNSHostnames", "network.enableDNSHostnames"),
            ("ttlSecondsAfterFinished", "ttlAfterFinished"),
            ("serviceAccountName", "serviceAccount"),
        ],
    ),
    (
        "network",
        &[(
            "subdomain",
            "enableDNSHostnames (the subdomain is the JobSet's name)",
        )],
    ),
    (
        "replicatedJobs",
        &[
            (
                "template",
                "the container fields directly in the replicated job",
            ),
            ("count", "replicas"),
            (
                "retries",
                "failurePolicy.maxRestarts (the whole set restarts)",
            ),
        ],
    ),
    (
        "failurePolicy",
        &[
            ("backoffLimit", "maxRestarts"),
            ("rules", "maxRestarts (rules are not supported)"),
        ],
    ),
    ("successPolicy", &[("targets", "targetReplicatedJobs")]),
    (
        "startupPolicy",
        &[(
            "startupPolicyOrder",
            "startupPolicy: InOrder (a plain value)",
        )],
    ),
];

impl Decoder {
    /// Reads a JobSet's root object (its `kind` was read by [`Decoder::job`]).
    pub(super) fn jobset_job(&mut self, root: &Node) -> Option<JobSetJob> {
        self.hints = JOBSET_HINTS;
        let path = Path::root();
        let f = self.fields(root, &path, JOBSET_FIELDS)?;
        let (name, namespace) = self.identity(&f);
        let replicated_jobs = self
            .required(&f, "replicatedJobs", Self::replicated_jobs)
            .unwrap_or_default();
        let metadata = self.metadata(&f);
        let failure_policy = self.optional(&f, "failurePolicy", |d, n, p| {
            let f = d.fields(n, p, FAILURE_POLICY_FIELDS)?;
            d.optional(&f, "maxRestarts", Self::count)
        });
        let enable_dns_hostnames = self.optional(&f, "network", |d, n, p| {
            let f = d.fields(n, p, NETWORK_FIELDS)?;
            d.optional(&f, "enableDNSHostnames", Self::boolean)
        });
        Some(JobSetJob {
            name,
            namespace,
            pod_identity: self.pod_identity(&f),
            replicated_jobs,
            max_restarts: failure_policy.unwrap_or(0),
            success_policy: self.optional(&f, "successPolicy", Self::jobset_success_policy),
            startup_policy: self.optional(&f, "startupPolicy", |d, n, p| {
                d.choice(n, p, &StartupOrder::NAMES)
            }),
            enable_dns_hostnames,
            ttl_after_finished: self.optional(&f, "ttlAfterFinished", Self::duration),
            metadata,
        })
    }

    fn replicated_jobs(&mut self, node: &Node, path: &Path) -> Option<Vec<ReplicatedJob>> {
        self.objects(
            node,
            path,
            "a list of replicated jobs ({name, replicas, image, ...})",
            REPLICATED_JOB_FIELDS,
            |d, f| {
                let name = d.required(f, "name", Self::string).unwrap_or_default();
                let replicas = d
                    .optional(f, "replicas", |d, n, p| {
                        d.integer(n, p, 1, i64::from(i32::MAX))
                            .and_then(|n| u32::try_from(n).ok())
                    })
                    .unwrap_or(1);
                let (image, image_pull_policy) = d.image_fields(f);
                ReplicatedJob {
                    name,
                    replicas,
                    image,
                    image_pull_policy,
                    process: d.process(f),
                }
            },
        )
    }

    fn jobset_success_policy(&mut self, node: &Node, path: &Path) -> Option<JobSetSuccessPolicy> {
        let f = self.fields(node, path, SUCCESS_POLICY_FIELDS)?;
        let operator = self.required(&f, "operator", |d, n, p| {
            d.choice(n, p, &SuccessOperator::NAMES)
        });
        let target_replicated_jobs = self
            .optional(&f, "targetReplicatedJobs", Self::strings)
            .unwrap_or_default();
        Some(JobSetSuccessPolicy {
            operator: operator?,
            target_replicated_jobs,
        })
    }
}
