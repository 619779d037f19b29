//! Spark applications: the two operators kubeferry targets, lean views of their
//! SparkApplications and driver pods, and the pure mappings from them to kubeferry's status
//! model. `crates/core/SPARK.md` is the guide for callers.

mod operator;

pub use operator::{
    DRIVER_CONTAINER, DRIVER_ROLE, EXECUTOR_ROLE, SPARK_APPLICATION_KIND, SPARK_APPLICATIONS,
    SPARK_ROLE_LABEL, SparkOperator,
};
