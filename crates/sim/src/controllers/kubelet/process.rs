//! Container processes: each runs in its own process group so it can be signalled as a whole;
//! the table remembers live groups so that shutdown leaves nothing behind.

use std::collections::HashSet;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use parking_lot::Mutex;

/// Live process groups.
#[derive(Default)]
pub struct ProcessTable {
    groups: Mutex<HashSet<i32>>,
}

impl ProcessTable {
    /// Remembers a group.
    pub fn register(&self, pgid: i32) {
        self.groups.lock().insert(pgid);
    }

    /// Forgets a group.
    pub fn unregister(&self, pgid: i32) {
        self.groups.lock().remove(&pgid);
    }

    /// Kills every live group.
    pub fn kill_all(&self) {
        let groups: Vec<i32> = self.groups.lock().drain().collect();
        for pgid in groups {
            signal_group(pgid, Signal::SIGKILL);
        }
    }
}

/// Sends a signal to a process group; a group that is already gone is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    if pgid <= 1 {
        return;
    }
    if let Err(error) = killpg(Pid::from_raw(pgid), signal)
        && error != nix::errno::Errno::ESRCH
    {
        tracing::warn!(message = "cannot signal container process group", pgid, %error);
    }
}

/// Resident memory of every process in a group, in bytes (Linux `/proc`).
pub fn group_rss_bytes(pgid: i32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces): state ppid pgrp ...
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.get(2).and_then(|f| f.parse::<i32>().ok()) != Some(pgid) {
            continue;
        }
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            for line in status.lines() {
                if let Some(kb) = line.strip_prefix("VmRSS:") {
                    let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                    total += kb * 1024;
                }
            }
        }
    }
    total
}
