//! How every kind watches its namespaces and waits on its watches: one setting for all kinds.

use std::time::Duration;

use super::ReflectorSettings;

/// How a kind's watches run, and how long and how often their readers wait.
#[derive(Clone, Debug)]
pub struct Watching {
    /// The watches' settings.
    pub reflector: ReflectorSettings,
    /// How long a status query waits for a namespace's first list before asking the API
    /// server directly.
    pub sync_timeout: Duration,
    /// How often a waiter re-evaluates time-based rules (grace periods, timeouts) when nothing
    /// changes, and a settler tries a failed write again.
    pub recheck_interval: Duration,
}

impl Default for Watching {
    fn default() -> Self {
        Self {
            reflector: ReflectorSettings::default(),
            sync_timeout: Duration::from_secs(10),
            recheck_interval: Duration::from_secs(1),
        }
    }
}
