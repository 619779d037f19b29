//! What the command line's end-to-end tests share: the job examples, `kubeferry` pointed at a
//! kubeconfig, running a command with a bound, and a process whose output is collected as it
//! comes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long any condition may take before a test fails: a bound on failure, never a claim
/// about speed.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of one of the repository's example job files.
pub fn example(name: &str) -> String {
    repo().join("examples").join(name).display().to_string()
}

/// `kubeferry` pointed at a kubeconfig.
pub fn kubeferry(kubeconfig: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubeferry"));
    command.env("KUBECONFIG", kubeconfig).kill_on_drop(true);
    command
}

/// A job file in `dir` running `script` with `sh -c` in busybox.
pub fn shell_job(dir: &Path, name: &str, script: &str) -> PathBuf {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "name: {name}\nimage: busybox\ncommand: [sh, -c, {}]\n",
            serde_json::to_string(script).unwrap()
        ),
    )
    .unwrap();
    file
}

/// A job file that prints `started`, waits until `gate` exists, prints `finished` and exits 0.
pub fn gated_job(dir: &Path, name: &str, gate: &Path) -> PathBuf {
    let script = format!(
        "echo started; while [ ! -e {} ]; do sleep 0.02; done; echo finished",
        gate.display()
    );
    shell_job(dir, name, &script)
}

/// Bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a command to its end, within a minute.
pub async fn run(command: &mut Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("kubeferry finished within a minute")
        .expect("kubeferry started")
}

/// A `kubeferry` process whose stdout and stderr are collected as they come, so that a test can
/// wait for what it printed (even a prompt with no line end).
pub struct Spawned {
    child: tokio::process::Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

fn collect(
    mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                return;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
}

impl Spawned {
    /// Starts `command` with stdout and stderr piped (stdin as the command says).
    pub fn start(command: &mut Command) -> Spawned {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubeferry starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().expect("piped"), stdout.clone()),
            collect(child.stderr.take().expect("piped"), stderr.clone()),
        ];
        Spawned {
            child,
            stdout,
            stderr,
            readers,
        }
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until `accept(stdout, stderr)` holds.
    pub async fn until(&self, what: &str, accept: impl Fn(&str, &str) -> bool) {
        let end = tokio::time::Instant::now() + DEADLINE;
        while !accept(&self.stdout(), &self.stderr()) {
            assert!(
                tokio::time::Instant::now() < end,
                "timed out waiting for {what}; stdout:\n{}\nstderr:\n{}",
                self.stdout(),
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGINT, as Ctrl-C in a terminal does.
    pub fn interrupt(&self) {
        let pid = self.child.id().expect("still running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .expect("SIGINT sent");
    }

    /// Waits for the process to end; its exit status, stdout and stderr.
    pub async fn finish(mut self) -> (ExitStatus, String, String) {
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("kubeferry did not end; stderr:\n{}", self.stderr()))
            .expect("kubeferry ran");
        for reader in self.readers.drain(..) {
            let _ = tokio::time::timeout(DEADLINE, reader).await;
        }
        (status, self.stdout(), self.stderr())
    }
}
