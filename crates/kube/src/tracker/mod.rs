//! The tracker: one watch per namespace and resource, answering status queries from memory.

pub mod reflector;

pub use reflector::{
    Departure, Entry, REFUSAL_LIFETIME, Reflector, ReflectorSettings, Refusal, Tombstone,
    WatchHealth,
};
