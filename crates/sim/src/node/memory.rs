//! Memory limits: one task reads the resident memory of every process from `/proc` once per
//! poll interval (on a blocking thread, and only while some container has a memory limit),
//! sums it per container process group, and in a group over its limit kills the biggest
//! process, as the kernel's OOM killer does in a container's cgroup. That may be a child while
//! the container's main process goes on (and may exit 0): the runtime still reports the
//! container OOMKilled.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::process::processes;

struct Limit {
    bytes: u64,
    killed: Arc<AtomicBool>,
}

/// The process groups with a memory limit.
#[derive(Default)]
pub struct MemoryWatch {
    limits: Mutex<HashMap<i32, Limit>>,
    added: Notify,
}

impl MemoryWatch {
    /// Watches a process group; the flag turns true when one of its processes was killed for
    /// the group using more than `bytes`.
    pub fn watch(&self, pgid: i32, bytes: u64) -> Arc<AtomicBool> {
        let killed = Arc::new(AtomicBool::new(false));
        self.limits.lock().insert(
            pgid,
            Limit {
                bytes,
                killed: killed.clone(),
            },
        );
        self.added.notify_one();
        killed
    }

    /// Stops watching a process group.
    pub fn unwatch(&self, pgid: i32) {
        self.limits.lock().remove(&pgid);
    }

    /// The process groups watched now.
    pub(crate) fn groups(&self) -> Vec<i32> {
        self.limits.lock().keys().copied().collect()
    }

    /// Notified when a group is added.
    pub(crate) fn added(&self) -> &Notify {
        &self.added
    }

    /// In each group over its limit, kills the biggest process, given their usage.
    pub(crate) fn enforce(&self, usage: &HashMap<i32, GroupUsage>) {
        let limits = self.limits.lock();
        for (pgid, used) in usage {
            if let Some(limit) = limits.get(pgid)
                && used.total > limit.bytes
                && let Some((pid, _)) = used.biggest
            {
                // Flagged first: the container reads it once it sees its main process end.
                // Unflagged again when nothing was killed (the process ended since the scan),
                // unless an earlier kill stands.
                let earlier = limit.killed.swap(true, Ordering::SeqCst);
                if let Err(error) = kill(Pid::from_raw(pid), Signal::SIGKILL) {
                    limit.killed.store(earlier, Ordering::SeqCst);
                    if error != nix::errno::Errno::ESRCH {
                        tracing::warn!(message = "cannot kill a process over its memory limit", pid, %error);
                    }
                }
            }
        }
    }
}

/// The resident memory of one process group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupUsage {
    /// All its processes', in bytes.
    pub total: u64,
    /// Its biggest process and that one's, in bytes.
    pub biggest: Option<(i32, u64)>,
}

/// Resident memory of the processes of the given groups, per group (one pass over `/proc`).
pub fn groups_usage(groups: &[i32]) -> HashMap<i32, GroupUsage> {
    let mut usage: HashMap<i32, GroupUsage> = HashMap::new();
    for process in processes().filter(|process| groups.contains(&process.group)) {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", process.pid)) {
            let bytes = status_rss_bytes(&status);
            let group = usage.entry(process.group).or_default();
            group.total += bytes;
            if group.biggest.is_none_or(|(_, most)| bytes > most) {
                group.biggest = Some((process.pid, bytes));
            }
        }
    }
    usage
}

/// `VmRSS` of a `/proc/PID/status` text, in bytes.
fn status_rss_bytes(status: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_lines_are_read() {
        assert_eq!(
            status_rss_bytes("Name:\tsh\nVmPeak:\t 2000 kB\nVmRSS:\t    1536 kB\n"),
            1536 * 1024
        );
        assert_eq!(status_rss_bytes("Name:\tkthreadd\n"), 0);
    }

    #[test]
    fn a_process_group_is_measured() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let pgid = child.id() as i32;
        let usage = groups_usage(&[pgid]);
        let _ = nix::sys::signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        let _ = child.wait();
        let group = usage.get(&pgid).copied().unwrap_or_default();
        assert!(group.total > 0, "{usage:?}");
        assert_eq!(group.biggest, Some((pgid, group.total)), "{usage:?}");
    }

    #[test]
    fn the_biggest_process_of_a_group_over_its_limit_is_killed() {
        use std::io::{BufRead, BufReader};
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        // A shell whose child is the big one: the OOM killer takes the child, the shell goes on.
        let mut shell = Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait $!; echo $?"])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("sh starts");
        let pgid = shell.id() as i32;
        let mut stdout = BufReader::new(shell.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the child's pid");
        let child: i32 = line.trim().parse().expect("a pid");
        let watch = MemoryWatch::default();
        let killed = watch.watch(pgid, 1000);
        // Under the limit: nothing happens.
        let under = GroupUsage {
            total: 1000,
            biggest: Some((child, 900)),
        };
        watch.enforce(&HashMap::from([(pgid, under)]));
        assert!(!killed.load(Ordering::SeqCst));
        let over = GroupUsage {
            total: 1001,
            biggest: Some((child, 900)),
        };
        watch.enforce(&HashMap::from([(pgid, over)]));
        assert!(killed.load(Ordering::SeqCst));
        line.clear();
        stdout.read_line(&mut line).expect("the child's end");
        let status = shell.wait().expect("sh ends");
        // The shell saw its child killed by SIGKILL, and ended by itself.
        assert_eq!(line.trim(), "137");
        assert!(status.success(), "{status:?}");
    }
}
