//! The tracker: one watch per namespace and resource, answering status queries from memory.

pub mod reflector;
mod reported;

pub use reflector::{Departure, Entry, Reflector, ReflectorSettings, Tombstone, WatchHealth};
pub use reported::LastReported;
