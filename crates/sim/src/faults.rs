//! Fault injection and request counting. Rules match requests by verb, resource, namespace
//! and identity and fail them, delay or hold them, drop the connection, or commit a write and
//! lose the response. Open watches can be stalled, cut or expired. Counters record every request by
//! verb, resource and identity. The listening socket can be taken down for a while or restarted.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};

/// What a matching request suffers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FaultAction {
    /// Answer with a Status error of this code (the reason the real server uses for it).
    #[serde(rename_all = "camelCase")]
    Error {
        /// HTTP status code.
        code: u16,
        /// Message (default: the real server's generic one for the code).
        #[serde(default)]
        message: Option<String>,
        /// `Retry-After` seconds (429 and 503 answers carry it).
        #[serde(default)]
        retry_after_seconds: Option<u32>,
    },
    /// Wait before handling the request.
    Latency {
        /// Milliseconds.
        millis: u64,
    },
    /// Close the connection without answering (nothing is done).
    DropConnection,
    /// Do the request (a write commits) and then close the connection without answering.
    LoseResponse,
    /// For watches: open the stream and send nothing (no events, no bookmarks).
    StallWatch,
    /// Keep the request waiting, unanswered and not yet done, until the rule is removed (or
    /// every rule cleared); then handle it. A rule used up by `times` still holds what it
    /// caught until it is removed. Lets a test change the cluster at an exact point between a
    /// request's sending and its handling.
    Hold,
}

impl FaultAction {
    /// An error of this code with the real server's generic message and no `Retry-After`.
    pub fn error(code: u16) -> Self {
        FaultAction::Error {
            code,
            message: None,
            retry_after_seconds: None,
        }
    }

    /// An error of this code with the generic message and `Retry-After: seconds`.
    pub fn error_retry_after(code: u16, seconds: u32) -> Self {
        FaultAction::Error {
            code,
            message: None,
            retry_after_seconds: Some(seconds),
        }
    }
}

/// Which requests a rule applies to; empty lists match anything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultMatch {
    /// Verbs: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection` (and `get` for non-resource paths).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources as `pods`, `jobs.batch`, `pods/log`, `sparkapplications.spark.apache.org`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Namespaces.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Identities (user names, e.g. `system:serviceaccount:ns:sa`).
    #[serde(default)]
    pub users: Vec<String>,
    /// Object names.
    #[serde(default)]
    pub names: Vec<String>,
}

/// A fault rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    /// Which requests.
    #[serde(default, rename = "match")]
    pub matcher: FaultMatch,
    /// What happens to them.
    pub action: FaultAction,
    /// How many requests the rule applies to before it lapses (`None`: until removed).
    #[serde(default)]
    pub times: Option<u32>,
}

impl FaultRule {
    /// A rule for every request.
    pub fn new(action: FaultAction) -> Self {
        FaultRule {
            matcher: FaultMatch::default(),
            action,
            times: None,
        }
    }

    /// Only these verbs.
    pub fn verbs(mut self, verbs: &[&str]) -> Self {
        self.matcher.verbs = verbs.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Only these resources (`pods`, `jobs.batch`, `pods/log`).
    pub fn resources(mut self, resources: &[&str]) -> Self {
        self.matcher.resources = resources.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Only these namespaces.
    pub fn namespaces(mut self, namespaces: &[&str]) -> Self {
        self.matcher.namespaces = namespaces.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Only these identities.
    pub fn users(mut self, users: &[&str]) -> Self {
        self.matcher.users = users.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Only these object names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.matcher.names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Only the next `n` matching requests.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }
}

/// What a request is, for matching and counting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFacts {
    /// Verb.
    pub verb: String,
    /// `pods`, `jobs.batch`, `pods/log`; for non-resource requests the path.
    pub resource: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Identity.
    pub user: String,
}

fn any_or(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|x| x == value)
}

impl FaultMatch {
    fn matches(&self, facts: &RequestFacts) -> bool {
        any_or(&self.verbs, &facts.verb)
            && any_or(&self.resources, &facts.resource)
            && any_or(&self.namespaces, &facts.namespace)
            && any_or(&self.users, &facts.user)
            && any_or(&self.names, &facts.name)
    }
}

/// The id of an installed rule.
pub type FaultId = u64;

/// What the matching rules decided for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Total added latency.
    pub latency: Duration,
    /// The first action that is neither latency nor a hold, if any.
    pub action: Option<FaultAction>,
    /// The hold rules that keep the request waiting until they are removed.
    pub holds: Vec<FaultId>,
}

/// The installed fault rules.
#[derive(Default)]
pub struct Faults {
    rules: Mutex<Vec<(FaultId, FaultRule)>>,
    next_id: Mutex<FaultId>,
    /// Hold rules not removed yet (used-up ones included).
    holding: Mutex<HashSet<FaultId>>,
    /// Woken when a hold ends.
    released: Notify,
}

impl Faults {
    /// Installs a rule.
    pub fn add(&self, rule: FaultRule) -> FaultId {
        let mut next = self.next_id.lock();
        *next += 1;
        let id = *next;
        if rule.action == FaultAction::Hold {
            self.holding.lock().insert(id);
        }
        self.rules.lock().push((id, rule));
        id
    }

    /// Removes a rule (and lets go of the requests it holds).
    pub fn remove(&self, id: FaultId) -> bool {
        let removed = {
            let mut rules = self.rules.lock();
            let before = rules.len();
            rules.retain(|(i, _)| *i != id);
            rules.len() != before
        };
        let released = self.holding.lock().remove(&id);
        if released {
            self.released.notify_waiters();
        }
        removed || released
    }

    /// Removes every rule (and lets go of every held request).
    pub fn clear(&self) {
        self.rules.lock().clear();
        self.holding.lock().clear();
        self.released.notify_waiters();
    }

    /// Waits until none of these hold rules is installed.
    pub async fn wait_released(&self, holds: &[FaultId]) {
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            // Registered before looking, so that a removal in between is not missed.
            notified.as_mut().enable();
            if !holds.iter().any(|id| self.holding.lock().contains(id)) {
                return;
            }
            notified.await;
        }
    }

    /// The installed rules.
    pub fn list(&self) -> Vec<(FaultId, FaultRule)> {
        self.rules.lock().clone()
    }

    /// Applies the rules to a request, using up counted rules.
    pub fn check(&self, facts: &RequestFacts) -> Verdict {
        let mut rules = self.rules.lock();
        if rules.is_empty() {
            return Verdict::default();
        }
        let mut verdict = Verdict::default();
        for (id, rule) in rules.iter_mut() {
            if rule.times == Some(0) || !rule.matcher.matches(facts) {
                continue;
            }
            match &rule.action {
                FaultAction::Latency { millis } => {
                    verdict.latency += Duration::from_millis(*millis);
                }
                FaultAction::Hold => verdict.holds.push(*id),
                other => {
                    if verdict.action.is_some() {
                        continue;
                    }
                    verdict.action = Some(other.clone());
                }
            }
            if let Some(n) = rule.times.as_mut() {
                *n -= 1;
            }
        }
        rules.retain(|(_, r)| r.times != Some(0));
        verdict
    }
}

/// A command to every open watch stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchControl {
    /// Send nothing for this long (events queue up and arrive afterwards).
    Stall(Duration),
    /// End the streams cleanly.
    Cut,
    /// End the streams abruptly (the connection is reset mid-stream).
    Abort,
    /// Send an ERROR 410 event and end the streams (the history is compacted too).
    Expire,
}

/// One counter: requests of a verb on a resource by an identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CounterKey {
    /// Verb.
    pub verb: String,
    /// `pods`, `jobs.batch`, `pods/log`, or a path for non-resource requests.
    pub resource: String,
    /// Identity.
    pub user: String,
}

/// Request counters.
#[derive(Default)]
pub struct Counters {
    counts: Mutex<BTreeMap<CounterKey, u64>>,
}

impl Counters {
    /// Counts one request.
    pub fn record(&self, facts: &RequestFacts) {
        let key = CounterKey {
            verb: facts.verb.clone(),
            resource: facts.resource.clone(),
            user: facts.user.clone(),
        };
        *self.counts.lock().entry(key).or_default() += 1;
    }

    /// Every counter.
    pub fn snapshot(&self) -> BTreeMap<CounterKey, u64> {
        self.counts.lock().clone()
    }

    /// Requests matching a verb and resource (any identity); empty strings match anything.
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.counts
            .lock()
            .iter()
            .filter(|(k, _)| {
                (verb.is_empty() || k.verb == verb)
                    && (resource.is_empty() || k.resource == resource)
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests by one identity.
    pub fn count_by_user(&self, user: &str) -> u64 {
        self.counts
            .lock()
            .iter()
            .filter(|(k, _)| k.user == user)
            .map(|(_, n)| n)
            .sum()
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        self.counts.lock().values().sum()
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        self.counts.lock().clear();
    }
}

/// A command to the accept loop.
#[derive(Clone, Debug)]
pub(crate) enum SocketCommand {
    /// Close the socket and every connection and stay down for `down_for` (a new command
    /// while down replaces what is left of it).
    Down {
        down_for: Duration,
        forget_watch_history: bool,
    },
    /// Listen again now, if down.
    Up,
}

/// Control of the listening socket (carried out by `server.rs`): go down for a while, restart. Commands are queued and
/// carried out in order (going down and coming back at once still drops every connection).
pub struct SocketControl {
    tx: mpsc::UnboundedSender<SocketCommand>,
    rx: parking_lot::Mutex<Option<mpsc::UnboundedReceiver<SocketCommand>>>,
}

impl Default for SocketControl {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        SocketControl {
            tx,
            rx: parking_lot::Mutex::new(Some(rx)),
        }
    }
}

impl SocketControl {
    /// Closes the socket and every connection, stays down for `down_for`, then listens again on
    /// the same port. `forget_watch_history` makes it a restart: watches resuming from earlier
    /// resourceVersions get 410, as after a real API server restart.
    pub fn go_down(&self, down_for: Duration, forget_watch_history: bool) {
        // The accept loop holds the receiver for as long as the server runs.
        let _ = self.tx.send(SocketCommand::Down {
            down_for,
            forget_watch_history,
        });
    }

    /// Ends a period of being down now (nothing happens while up).
    pub fn come_back(&self) {
        let _ = self.tx.send(SocketCommand::Up);
    }

    /// The commands, for the one accept loop.
    pub(crate) fn take_commands(&self) -> Option<mpsc::UnboundedReceiver<SocketCommand>> {
        self.rx.lock().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(verb: &str, resource: &str) -> RequestFacts {
        RequestFacts {
            verb: verb.into(),
            resource: resource.into(),
            namespace: "default".into(),
            name: String::new(),
            user: "u".into(),
        }
    }

    #[test]
    fn counted_rules_lapse_and_latency_adds_up() {
        let faults = Faults::default();
        faults.add(
            FaultRule::new(FaultAction::error(500))
                .verbs(&["create"])
                .times(1),
        );
        faults.add(FaultRule::new(FaultAction::Latency { millis: 5 }));
        faults.add(FaultRule::new(FaultAction::Latency { millis: 7 }).resources(&["pods"]));
        let first = faults.check(&facts("create", "pods"));
        assert_eq!(first.latency, Duration::from_millis(12));
        assert!(matches!(
            first.action,
            Some(FaultAction::Error { code: 500, .. })
        ));
        let second = faults.check(&facts("create", "pods"));
        assert_eq!(second.action, None);
        assert_eq!(faults.list().len(), 2);
        assert_eq!(
            faults.check(&facts("get", "jobs.batch")).latency,
            Duration::from_millis(5)
        );
    }

    #[test]
    fn rules_round_trip_as_json() {
        let rule =
            FaultRule::new(FaultAction::error_retry_after(429, 2)).resources(&["jobs.batch"]);
        let text = serde_json::to_string(&rule).unwrap_or_default();
        assert!(text.contains("\"retryAfterSeconds\":2"), "{text}");
        let back: FaultRule = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, rule);
    }

    #[test]
    fn counters_add_up_by_key() {
        let counters = Counters::default();
        counters.record(&facts("get", "pods"));
        counters.record(&facts("get", "pods"));
        counters.record(&facts("list", "pods"));
        assert_eq!(counters.count("get", "pods"), 2);
        assert_eq!(counters.count("", "pods"), 3);
        assert_eq!(counters.count_by_user("u"), 3);
        assert_eq!(counters.total(), 3);
    }
}
