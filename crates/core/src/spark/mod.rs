//! Spark applications: the two operators kubeferry targets, lean views of their
//! SparkApplications and driver pods, and the pure mapping from them to kubeferry's status
//! model. `docs/spark.md` ("The contract of the Spark backend") is the guide for callers.
//!
//! [`spark_status`] applies the precedence rules documented in `docs/statuses.md`: an
//! outcome the operator recorded wins over everything that happens after it; a cancel request
//! wins over what is still in progress; nothing is terminal unless the operator showed it or
//! the no-status timeout expired (and then only once the application is deleted); a status
//! this version cannot read keeps the last non-terminal status and warns, and is never taken
//! for "no status".

mod apache;
mod kubeflow;
mod mapping;
mod operator;
mod reading;
mod view;

#[cfg(test)]
mod tests;

pub use mapping::{
    AppObservation, SparkAction, SparkMapped, SparkMappingConfig, pick_driver, spark_status,
};
pub use operator::{
    DRIVER_CONTAINER, DRIVER_ROLE, EXECUTOR_ROLE, SPARK_APPLICATION_KIND, SPARK_APPLICATIONS,
    SPARK_ROLE_LABEL, SparkOperator,
};
pub use view::{
    ApacheState, ApacheStatus, ApacheSummary, DriverView, KubeflowState, KubeflowStatus,
    RestartPolicyView, RestartView, SparkAppView, SparkStatus,
};
