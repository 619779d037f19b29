//! Container processes: each runs in its own process group so it can be signalled as a whole,
//! with stdout and stderr on one pipe so its log keeps the order of its writes; the table
//! remembers live groups so that shutdown leaves nothing behind.
//!
//! A process is started off the runtime's worker threads, and always through `posix_spawn`
//! (the program is looked up in the container's `PATH` here, as the container runtime does):
//! with a name to search in a changed `PATH`, the standard library would `fork` instead, which
//! copies the page tables of this whole (large) process and blocks the calling thread until
//! the child has replaced them.

use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::net::unix::pipe;

use super::workers::Kubelet;

/// Live process groups, and those that ended lately, so that shutdown leaves nothing running.
#[derive(Default)]
pub struct ProcessTable {
    groups: Mutex<HashSet<i32>>,
    /// Groups whose first process ended and that were sent SIGKILL: shutdown waits for what
    /// is left of them, never signals them again (their number may be another's by then).
    ended: Mutex<HashSet<i32>>,
    /// Set by shutdown: a group started after it is killed at once.
    closed: std::sync::atomic::AtomicBool,
}

/// How many ended groups are remembered before those no longer running are forgotten.
const ENDED_KEPT: usize = 32;

impl ProcessTable {
    /// Remembers a group (killed at once after shutdown).
    pub fn register(&self, pgid: i32) {
        self.groups.lock().insert(pgid);
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            self.groups.lock().remove(&pgid);
            signal_group(pgid, Signal::SIGKILL);
            wait_gone(&HashSet::from([pgid]));
        }
    }

    /// Forgets a group whose first process ended and that was sent SIGKILL; shutdown still
    /// waits for what is left of it.
    pub fn unregister(&self, pgid: i32) {
        self.groups.lock().remove(&pgid);
        let mut ended = self.ended.lock();
        ended.insert(pgid);
        if ended.len() > ENDED_KEPT {
            let running = running_of(&ended);
            ended.retain(|group| running.contains(group));
        }
    }

    /// Kills every live group, then waits until none of their processes (nor any of the
    /// ended groups') runs any more, so that nothing a container started outlives the cluster.
    pub fn kill_all(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let groups: HashSet<i32> = self.groups.lock().drain().collect();
        for &pgid in &groups {
            signal_group(pgid, Signal::SIGKILL);
        }
        let mut waited: HashSet<i32> = self.ended.lock().drain().collect();
        waited.extend(groups);
        wait_gone(&waited);
    }
}

/// Waits until no process of `groups`, each sent SIGKILL, runs. SIGKILL ends a process within
/// milliseconds unless it is stuck in the kernel: the bound of 2 s is for that case only.
fn wait_gone(groups: &HashSet<i32>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !running_of(groups).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Those of `groups` with a process that still runs (one that ended and waits to be reaped
/// does not).
fn running_of(groups: &HashSet<i32>) -> HashSet<i32> {
    if groups.is_empty() {
        return HashSet::new();
    }
    processes()
        .filter(|process| groups.contains(&process.group) && !matches!(process.state, 'Z' | 'X'))
        .map(|process| process.group)
        .collect()
}

/// A process as its `/proc/PID/stat` tells.
pub(super) struct ProcessStat {
    pub pid: i32,
    /// `R`, `S`, `Z` (ended, not yet reaped), ...
    pub state: char,
    pub group: i32,
}

/// Every process `/proc` lists now (none where it cannot be read).
pub(super) fn processes() -> impl Iterator<Item = ProcessStat> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (state, group) = stat_state_and_group(&stat)?;
            Some(ProcessStat { pid, state, group })
        })
}

/// The state and the process group in a `/proc/PID/stat` line.
fn stat_state_and_group(stat: &str) -> Option<(char, i32)> {
    // Fields after the command name (which may hold spaces and parentheses): state ppid pgrp ...
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
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

/// What a container process is started with.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The command and its arguments (not empty).
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub workdir: PathBuf,
}

/// A started container process.
pub struct Started {
    /// The process (killed when dropped).
    pub child: tokio::process::Child,
    /// Its process group.
    pub pgid: i32,
    /// The read end of the pipe that is both its stdout and its stderr.
    pub output: pipe::Receiver,
}

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The command is not in the container's `PATH`.
    #[error("exec: {0:?}: executable file not found in $PATH")]
    NotFound(String),
    /// The command names a path that does not exist.
    #[error("exec: {0:?}: stat {0}: no such file or directory")]
    Missing(String),
    /// The system refused to start it.
    #[error("exec: {program:?}: {source}")]
    Spawn {
        /// The command.
        program: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Finds the program a command names, as the container runtime does: a name with a slash is
/// a path (relative ones from the working directory), any other name is searched in `PATH`
/// (an empty entry meaning the working directory).
pub fn find_program(name: &str, path: &str, workdir: &Path) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    if name.is_empty() {
        return None;
    }
    path.split(':')
        .map(|dir| match dir {
            "" => workdir.to_path_buf(),
            dir => workdir.join(dir),
        })
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Starts the process (blocking: looks the program up, and waits for `posix_spawn`).
fn spawn_now(launch: Launch) -> Result<(tokio::process::Child, OwnedFd), LaunchError> {
    let name = launch.argv[0].clone();
    let path = launch
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let program = find_program(&name, path, &launch.workdir)
        .ok_or_else(|| LaunchError::NotFound(name.clone()))?;
    if !launch.workdir.join(&program).exists() {
        return Err(LaunchError::Missing(name));
    }
    let spawn_error = |source| LaunchError::Spawn {
        program: name.clone(),
        source,
    };
    let (reader, writer) = io::pipe().map_err(spawn_error)?;
    let stderr = writer.try_clone().map_err(spawn_error)?;
    let mut command = std::process::Command::new(program);
    command
        .arg0(&name)
        .args(&launch.argv[1..])
        .env_clear()
        .envs(launch.env)
        .current_dir(&launch.workdir)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(stderr)
        .process_group(0);
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let child = command.spawn().map_err(spawn_error)?;
    // The write ends go with `command`: the pipe ends when the process and its children close
    // theirs.
    drop(command);
    Ok((child, OwnedFd::from(reader)))
}

/// Starts a container process on one of the kubelet's blocking threads.
pub async fn launch(kubelet: &Kubelet, launch: Launch) -> Result<Started, LaunchError> {
    let name = launch.argv.first().cloned().unwrap_or_default();
    let (child, reader) =
        kubelet
            .on_host(move || spawn_now(launch))
            .await
            .map_err(|source| LaunchError::Spawn {
                program: name.clone(),
                source,
            })??;
    let output = pipe::Receiver::from_owned_fd(reader).map_err(|source| LaunchError::Spawn {
        program: name.clone(),
        source,
    })?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    Ok(Started {
        child,
        pgid,
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_are_read() {
        assert_eq!(
            stat_state_and_group("4242 (my (odd) cmd) S 1 4240 4240 0 -1 4194560 123"),
            Some(('S', 4240))
        );
        assert_eq!(
            stat_state_and_group("4243 (sh) Z 1 4240 4240 0 -1 4194560 123"),
            Some(('Z', 4240))
        );
        assert_eq!(stat_state_and_group("garbage"), None);
    }

    /// A `sleep` in a process group of its own, and that group.
    fn sleeper() -> (std::process::Child, HashSet<i32>) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let group = i32::try_from(child.id()).expect("a pid");
        (child, HashSet::from([group]))
    }

    #[test]
    fn shutdown_returns_once_nothing_of_its_groups_runs() {
        let table = ProcessTable::default();
        let (mut live, live_group) = sleeper();
        table.register(*live_group.iter().next().unwrap());
        // A group whose first process ended was sent SIGKILL by its container; here it dies
        // a moment later, and shutdown must wait for it without signalling it again.
        let (mut ended, ended_group) = sleeper();
        let ended_pgid = *ended_group.iter().next().unwrap();
        table.register(ended_pgid);
        table.unregister(ended_pgid);
        assert_eq!(running_of(&live_group), live_group, "it runs");
        let killer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            signal_group(ended_pgid, Signal::SIGKILL);
        });
        table.kill_all();
        // Both are gone, or zombies not yet reaped (which count as gone).
        assert!(running_of(&live_group).is_empty(), "killed and waited for");
        assert!(running_of(&ended_group).is_empty(), "waited for");
        killer.join().expect("joined");
        live.wait().expect("reaped");
        ended.wait().expect("reaped");

        // A group started after shutdown is killed at once.
        let (mut late, late_group) = sleeper();
        table.register(*late_group.iter().next().unwrap());
        assert!(running_of(&late_group).is_empty());
        late.wait().expect("reaped");
    }

    #[test]
    fn programs_are_found_like_the_runtime_finds_them() {
        let root = Path::new("/");
        assert_eq!(
            find_program("sh", "/nonexistent:/bin:/usr/bin", root),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            find_program("./run.sh", "/bin", root),
            Some(PathBuf::from("./run.sh"))
        );
        assert_eq!(find_program("sh", "/nonexistent", root), None);
        assert_eq!(find_program("", "/bin", root), None);
        // An empty entry is the working directory.
        assert_eq!(
            find_program("sh", ":/usr/bin", Path::new("/bin")),
            Some(PathBuf::from("/bin/sh"))
        );
    }
}
