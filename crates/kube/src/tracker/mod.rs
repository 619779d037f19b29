//! The tracker: one watch per namespace and resource (for container jobs, three per namespace:
//! Jobs, their pods, and the Job controller's refusals to create pods), answering status
//! queries from memory.

mod namespaces;
mod recent;
mod reflector;
mod reported;
mod watching;

pub(crate) use namespaces::{Namespaces, lock};
pub(crate) use recent::Recent;
pub(crate) use reflector::{Departure, Entry, Reflector, Tombstone, refusal_of};
pub use reflector::{ReflectorSettings, Refusal, WatchHealth};
pub(crate) use reported::LastReported;
pub use watching::Watching;
