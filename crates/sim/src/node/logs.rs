//! Container logs kept in memory: per pod, per container, per run (restart), each line with
//! the time it was written, with a change signal for followers.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use parking_lot::Mutex;
use tokio::sync::watch;

/// One line of output (with its newline, except a last unterminated line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// When the line was written.
    pub time: Timestamp,
    /// The bytes.
    pub text: Bytes,
}

#[derive(Default)]
struct RunInner {
    lines: VecDeque<LogLine>,
    bytes: usize,
    /// Lines dropped from the front to stay under the size limit.
    dropped: u64,
    finished: bool,
}

/// The log of one run of a container.
pub struct RunLog {
    inner: Mutex<RunInner>,
    limit: usize,
    /// Lines ever appended (including dropped ones), and whether the run has finished.
    changed: watch::Sender<(u64, bool)>,
}

/// Lines read from a run, from a cursor.
pub struct ReadOut {
    /// The lines.
    pub lines: Vec<LogLine>,
    /// Cursor for the next read.
    pub next: u64,
    /// Whether the run has finished (no more lines will come).
    pub finished: bool,
}

impl RunLog {
    fn new(limit: usize) -> Self {
        let (changed, _) = watch::channel((0, false));
        RunLog {
            inner: Mutex::new(RunInner::default()),
            limit,
            changed,
        }
    }

    /// Appends a line.
    pub fn append(&self, text: Bytes) {
        let mut inner = self.inner.lock();
        inner.bytes += text.len();
        inner.lines.push_back(LogLine {
            time: Timestamp::now(),
            text,
        });
        while inner.bytes > self.limit && inner.lines.len() > 1 {
            if let Some(old) = inner.lines.pop_front() {
                inner.bytes -= old.text.len();
                inner.dropped += 1;
            }
        }
        let total = inner.dropped + inner.lines.len() as u64;
        self.changed.send_replace((total, inner.finished));
    }

    /// Marks the run finished.
    pub fn finish(&self) {
        let mut inner = self.inner.lock();
        inner.finished = true;
        let total = inner.dropped + inner.lines.len() as u64;
        self.changed.send_replace((total, true));
    }

    /// Lines from cursor `from` on (a cursor before dropped lines starts at the oldest kept).
    pub fn read_from(&self, from: u64) -> ReadOut {
        let inner = self.inner.lock();
        let start = from.saturating_sub(inner.dropped) as usize;
        let lines: Vec<LogLine> = inner.lines.iter().skip(start).cloned().collect();
        ReadOut {
            next: inner.dropped + inner.lines.len() as u64,
            lines,
            finished: inner.finished,
        }
    }

    /// A receiver that changes whenever a line is appended or the run finishes.
    pub fn subscribe(&self) -> watch::Receiver<(u64, bool)> {
        self.changed.subscribe()
    }

    /// The end of the log a termination message falls back to.
    pub fn message_tail(&self) -> Vec<u8> {
        let inner = self.inner.lock();
        super::termination::log_tail(inner.lines.iter().map(|l| l.text.as_ref()))
    }

    /// Whether the run has finished.
    pub fn is_finished(&self) -> bool {
        self.inner.lock().finished
    }
}

/// The runs of each container, by (pod uid, container name).
type Runs = HashMap<(String, String), Vec<Arc<RunLog>>>;

/// Logs of every container run, by pod uid and container name.
pub struct LogStore {
    limit: usize,
    runs: Mutex<Runs>,
}

impl LogStore {
    /// An empty store keeping at most `limit` bytes per run.
    pub fn new(limit: usize) -> Self {
        LogStore {
            limit: limit.max(1),
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// Starts the log of a new run.
    pub fn start_run(&self, pod_uid: &str, container: &str) -> Arc<RunLog> {
        let run = Arc::new(RunLog::new(self.limit));
        self.runs
            .lock()
            .entry((pod_uid.to_string(), container.to_string()))
            .or_default()
            .push(run.clone());
        run
    }

    /// The runs of a container, oldest first.
    pub fn runs(&self, pod_uid: &str, container: &str) -> Vec<Arc<RunLog>> {
        self.runs
            .lock()
            .get(&(pod_uid.to_string(), container.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// Forgets a pod's logs.
    pub fn remove_pod(&self, pod_uid: &str) {
        self.runs.lock().retain(|(uid, _), _| uid != pod_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_keep_lines_under_the_limit() {
        let store = LogStore::new(10);
        let run = store.start_run("u", "main");
        run.append(Bytes::from_static(b"aaaa\n"));
        run.append(Bytes::from_static(b"bbbb\n"));
        run.append(Bytes::from_static(b"cccc\n"));
        let out = run.read_from(0);
        let text: Vec<&[u8]> = out.lines.iter().map(|l| l.text.as_ref()).collect();
        assert_eq!(text, vec![b"bbbb\n".as_ref(), b"cccc\n".as_ref()]);
        assert_eq!(out.next, 3);
        assert!(!out.finished);
        run.finish();
        assert!(run.read_from(3).finished);
        assert_eq!(store.runs("u", "main").len(), 1);
        store.remove_pod("u");
        assert!(store.runs("u", "main").is_empty());
    }
}
