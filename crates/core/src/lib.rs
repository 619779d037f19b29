//! kubeferry's core: job specs, templates, execution ids, the status model and pure status mappings.
//!
//! Nothing in this crate does I/O. The Kubernetes backend (`kubeferry-kube`) turns specs into
//! objects and feeds the objects it observes back through the mappings here.

mod clock;
pub mod container;
pub mod duration;
pub mod id;
pub mod indexes;
pub mod jobset;
pub mod marks;
mod named;
pub mod observation;
#[cfg(feature = "openapi")]
mod openapi;
pub mod pod;
pub mod record;
pub mod spark;
pub mod spec;
pub mod status;
pub mod template;
pub mod timeline;

pub use id::{ExecutionId, IdError, JobKind};
pub use spec::{ContainerJobSpec, JobSpec, SparkJobSpec, SpecError};
pub use status::{ExecutionInfo, JobState, Reason};
