//! The tracker: one watch per namespace and resource (for container jobs, three per namespace:
//! Jobs, their pods, and the Job controller's refusals to create pods), answering status
//! queries from memory.

mod namespaces;
mod recent;
pub mod reflector;
mod reported;

pub(crate) use namespaces::{Namespaces, lock, reported_key};
pub(crate) use recent::Recent;
pub use reflector::{
    Departure, Entry, REFUSAL_LIFETIME, Reflector, ReflectorSettings, Refusal, Tombstone,
    WatchHealth,
};
pub use reported::LastReported;
