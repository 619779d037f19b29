//! kubectl's habits, run through the real binary: shell completion (in a real bash), the
//! `kubectl ferry` plugin through the real kubectl, `list -A`, `--sort-by`, `-o wide|name|
//! jsonpath`, and `-w` rows for a job's whole life.

mod common;

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::{Value, json};
use tokio::process::Command;

use common::*;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kubeferry"))
}

struct Cluster {
    sim: SimCluster,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

/// A simulated cluster with a second namespace, `team`.
async fn cluster() -> Cluster {
    let sim = SimCluster::start(SimConfig::for_tests()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig_as(&kubeconfig, "test", sim.admin_token())
        .unwrap();
    sim.create(
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .unwrap();
    Cluster {
        sim,
        kubeconfig,
        dir,
    }
}

/// Runs and checks success; stdout.
async fn ok(command: &mut Command) -> String {
    let output = run(command).await;
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Submits a job file with flags; its execution id.
async fn submit(kubeconfig: &Path, file: &str, flags: &[&str]) -> String {
    ok(kubeferry(kubeconfig)
        .args(flags)
        .args(["submit", "-f", file]))
    .await
    .trim()
    .to_string()
}

/// Waits for a job's end.
async fn wait(kubeconfig: &Path, id: &str) {
    let _ = run(kubeferry(kubeconfig).args(["wait", id, "--timeout", "30s"])).await;
}

#[tokio::test]
async fn completion_prints_shell_code_for_every_shell() {
    for (shell, says) in [
        (
            "bash",
            "complete -o nospace -o bashdefault -o nosort -F _clap_complete_kubeferry kubeferry",
        ),
        ("zsh", "compdef _clap_dynamic_completer_kubeferry kubeferry"),
        (
            "fish",
            "complete --keep-order --exclusive --command kubeferry",
        ),
        (
            "powershell",
            "Register-ArgumentCompleter -Native -CommandName kubeferry",
        ),
    ] {
        let output = ok(Command::new(binary()).args(["completion", shell])).await;
        assert!(output.contains(says), "{shell}:\n{output}");
        assert!(output.contains("COMPLETE"), "{shell}:\n{output}");
    }
    let output = run(Command::new(binary()).args(["completion", "tcsh"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("invalid value 'tcsh'"));
}

/// What bash's completion offers for `words` (the last one being completed), with the shell
/// code `kubeferry completion bash` prints sourced in a real bash.
async fn bash_completes(cluster: &Cluster, words: &[&str]) -> Vec<String> {
    let script = cluster.dir.path().join("kubeferry.bash");
    std::fs::write(
        &script,
        ok(Command::new(binary()).args(["completion", "bash"])).await,
    )
    .unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source {script}; COMP_WORDS=({words}); COMP_CWORD={last}; \
         _clap_complete_kubeferry kubeferry {current} {previous}; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script = script.display(),
        words = quoted.join(" "),
        last = words.len() - 1,
        current = quoted[words.len() - 1],
        previous = quoted[words.len() - 2],
    );
    let path = format!(
        "{}:{}",
        binary().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = ok(Command::new("bash")
        .args(["--norc", "-c", &program])
        .env("PATH", path)
        .env("KUBECONFIG", &cluster.kubeconfig))
    .await;
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn bash_completes_commands_flags_values_and_execution_ids() {
    let cluster = cluster().await;
    let here = submit(&cluster.kubeconfig, &example("hello.yaml"), &[]).await;
    let there = submit(&cluster.kubeconfig, &example("hello.yaml"), &["-n", "team"]).await;

    let commands = bash_completes(&cluster, &["kubeferry", "sta"]).await;
    assert_eq!(commands, ["status"]);
    let flags = bash_completes(&cluster, &["kubeferry", "list", "--sort"]).await;
    assert_eq!(flags, ["--sort-by"]);
    let keys = bash_completes(&cluster, &["kubeferry", "list", "--sort-by", ""]).await;
    assert_eq!(keys, ["created", "state", "name"]);
    // Ids of every namespace, from the cluster of the current context.
    let ids = bash_completes(&cluster, &["kubeferry", "status", ""]).await;
    assert!(ids.contains(&here) && ids.contains(&there), "{ids:?}");
    let prefix = &there[..there.len() - 3];
    let ids = bash_completes(&cluster, &["kubeferry", "logs", prefix]).await;
    assert_eq!(ids, std::slice::from_ref(&there));
    let ids = bash_completes(&cluster, &["kubeferry", "wait", "nothing/like/this"]).await;
    assert!(ids.is_empty(), "{ids:?}");
}

/// `kubectl` with only a `kubectl-ferry` symlink to kubeferry (and kubectl itself) on the PATH.
fn kubectl_with_plugin(dir: &Path, home: &Path) -> Command {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["kubectl-ferry", "kubectl_complete-ferry"] {
        let plugin = bin.join(name);
        if !plugin.exists() {
            std::os::unix::fs::symlink(binary(), &plugin).unwrap();
        }
    }
    let mut command = Command::new("/usr/bin/kubectl");
    command
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn kubectl_runs_kubeferry_as_its_ferry_plugin() {
    if !Path::new("/usr/bin/kubectl").exists() {
        eprintln!("skipping: kubectl is not installed");
        return;
    }
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();

    // kubectl finds the plugin on the PATH; its help speaks of `kubectl ferry`.
    let help = ok(kubectl_with_plugin(dir.path(), home.path()).args(["ferry", "--help"])).await;
    assert!(
        help.contains("Usage: kubectl ferry [OPTIONS] <COMMAND>"),
        "{help}"
    );
    let help =
        ok(kubectl_with_plugin(dir.path(), home.path()).args(["ferry", "run", "--help"])).await;
    assert!(
        help.contains("Usage: kubectl ferry run [OPTIONS]"),
        "{help}"
    );
    let plugins = run(kubectl_with_plugin(dir.path(), home.path()).args(["plugin", "list"])).await;
    assert!(
        text(&plugins.stdout).contains("kubectl-ferry"),
        "{}\n{}",
        text(&plugins.stdout),
        text(&plugins.stderr)
    );
    // A usage error names the plugin as the user typed it.
    let output = run(kubectl_with_plugin(dir.path(), home.path()).args(["ferry", "lst"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("Usage: kubectl ferry [OPTIONS] <COMMAND>"),
        "{}",
        text(&output.stderr)
    );

    // `kubectl ferry run -f` with kubectl's own flags.
    let kubeconfig = cluster.kubeconfig.display().to_string();
    let output = run(kubectl_with_plugin(dir.path(), home.path()).args([
        "ferry",
        "run",
        "-f",
        &example("hello.yaml"),
        "--kubeconfig",
        &kubeconfig,
        "--context",
        "test",
        "-n",
        "team",
    ]))
    .await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("hello from kubeferry\n"), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("test/job/team/hello-") && last.contains(" SUCCEEDED (Completed"),
        "{last}"
    );
    let id = last.split_whitespace().next().unwrap();
    let listed = ok(kubectl_with_plugin(dir.path(), home.path()).args([
        "ferry",
        "--kubeconfig",
        &kubeconfig,
        "list",
        "-n",
        "team",
        "-o",
        "name",
    ]))
    .await;
    assert_eq!(listed, format!("{id}\n"));
    // The Job is there for kubectl itself too.
    let name = id.rsplit('/').next().unwrap();
    let jobs = ok(kubectl_with_plugin(dir.path(), home.path()).args([
        "--kubeconfig",
        &kubeconfig,
        "get",
        "jobs",
        "-n",
        "team",
        "-o",
        "name",
    ]))
    .await;
    assert_eq!(jobs, format!("job.batch/{name}\n"));

    // kubectl's own completion of `kubectl ferry ...` (kubectl_complete-ferry), ids included.
    let completed =
        ok(kubectl_with_plugin(dir.path(), home.path()).args(["__complete", "ferry", "sta"])).await;
    assert_eq!(completed, "status\tPrint the status of jobs\n:4\n");
    let completed = ok(kubectl_with_plugin(dir.path(), home.path())
        .env("KUBECONFIG", &cluster.kubeconfig)
        .args(["__complete", "ferry", "logs", "test/job/team/"]))
    .await;
    assert_eq!(completed, format!("{id}\tSUCCEEDED\n:4\n"));
    drop(cluster.sim);
}

#[tokio::test]
async fn list_all_namespaces_sorts_and_prints_wide_names_and_jsonpath() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let failed = submit(kubeconfig, &example("fail.yaml"), &["-n", "team"]).await;
    wait(kubeconfig, &failed).await;
    let succeeded = submit(kubeconfig, &example("hello.yaml"), &[]).await;
    wait(kubeconfig, &succeeded).await;

    // One namespace by default; every one with -A, oldest first.
    let names = ok(kubeferry(kubeconfig).args(["list", "-o", "name"])).await;
    assert_eq!(names, format!("{succeeded}\n"));
    let names = ok(kubeferry(kubeconfig).args(["list", "-A", "-o", "name"])).await;
    let mut listed: Vec<&str> = names.lines().collect();
    listed.sort();
    let mut both = [failed.as_str(), succeeded.as_str()];
    both.sort();
    assert_eq!(listed, both, "{names}");
    let names = ok(kubeferry(kubeconfig).args([
        "list",
        "--all-namespaces",
        "--sort-by=name",
        "-o",
        "name",
    ]))
    .await;
    let mut sorted = [failed.clone(), succeeded.clone()];
    sorted.sort();
    assert_eq!(names, sorted.join("\n") + "\n");
    // Lifecycle order: SUCCEEDED before FAILED.
    let names =
        ok(kubeferry(kubeconfig).args(["list", "-A", "--sort-by", "state", "-o", "name"])).await;
    assert_eq!(names, format!("{succeeded}\n{failed}\n"));

    // The fields scripts read.
    let template = r#"jsonpath={range .items[*]}{.job.id} {.job.state} {.job.exitCode} {.job.reason}{"\n"}{end}"#;
    let lines =
        ok(kubeferry(kubeconfig).args(["list", "-A", "--sort-by=state", "-o", template])).await;
    assert_eq!(
        lines,
        format!("{succeeded} SUCCEEDED 0 Completed\n{failed} FAILED 3 Error\n")
    );
    let states = ok(kubeferry(kubeconfig).args([
        "list",
        "-A",
        "--sort-by=state",
        "-o",
        "jsonpath={.items[*].job.state}",
    ]))
    .await;
    assert_eq!(states, "SUCCEEDED FAILED");
    let state =
        ok(kubeferry(kubeconfig).args(["status", &failed, "-o", "jsonpath={.state} {.exitCode}"]))
            .await;
    assert_eq!(state, "FAILED 3");
    let states = ok(kubeferry(kubeconfig).args([
        "status",
        &failed,
        &succeeded,
        "-o",
        "jsonpath={.items[*].reason}",
    ]))
    .await;
    assert_eq!(states, "Error Completed");
    let output = run(kubeferry(kubeconfig).args(["list", "-o", "jsonpath={.items[*].state"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("unclosed '{'"),
        "{}",
        text(&output.stderr)
    );

    // Wide: the pod, its node, the attempts and how long it ran.
    let wide = ok(kubeferry(kubeconfig).args(["list", "-A", "-o", "wide"])).await;
    let lines: Vec<&str> = wide.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "ID", "JOB", "ID", "STATE", "REASON", "EXIT", "CREATED", "POD", "NODE", "ATTEMPTS",
            "DURATION", "MESSAGE"
        ]
    );
    let json: Value =
        serde_json::from_str(&ok(kubeferry(kubeconfig).args(["list", "-A", "-o", "json"])).await)
            .unwrap();
    for (line, job) in lines[1..].iter().zip(json["items"].as_array().unwrap()) {
        let pod = job["pod"].as_str().expect("a pod");
        let node = job["node"].as_str().expect("a node");
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words
            .iter()
            .position(|w| *w == pod)
            .expect("the pod's column");
        assert_eq!(words[at + 1..at + 3], [node, "1"], "{line}");
        assert!(words[at + 3].ends_with('s'), "a duration: {line}");
        assert_eq!(job["attempts"], 1);
        let pod_object = cluster
            .sim
            .object(
                "",
                "pods",
                job["job"]["id"]
                    .as_str()
                    .unwrap()
                    .split('/')
                    .nth(2)
                    .unwrap(),
                pod,
            )
            .expect("the pod exists");
        assert_eq!(pod_object["spec"]["nodeName"], node);
    }
}

/// The `word`th word (the STATE column) of the table rows printed for `id`.
fn states_of(table: &str, id: &str, word: usize) -> Vec<String> {
    table
        .lines()
        .filter(|line| line.starts_with(&format!("{id} ")))
        .map(|line| line.split_whitespace().nth(word).unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn list_watch_prints_a_row_per_change_of_a_jobs_whole_life_until_interrupted() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    // A job already there when the watch starts, and one submitted while it runs.
    let before = submit(kubeconfig, &example("hello.yaml"), &[]).await;
    wait(kubeconfig, &before).await;
    let watch = Spawned::start(kubeferry(kubeconfig).args(["list", "-w"]));
    watch
        .until("the listed row", |out, _| out.contains(&before))
        .await;
    let gate = cluster.dir.path().join("gate");
    let job = gated_job(cluster.dir.path(), "watched", &gate)
        .display()
        .to_string();
    let id = submit(kubeconfig, &job, &[]).await;
    watch
        .until("the STARTED row", |out, _| {
            states_of(out, &id, 2).contains(&"STARTED".to_string())
        })
        .await;
    std::fs::write(&gate, b"").unwrap();
    watch
        .until("the SUCCEEDED row", |out, _| {
            states_of(out, &id, 2).contains(&"SUCCEEDED".to_string())
        })
        .await;
    watch.interrupt();
    let (status, stdout, _) = watch.finish().await;
    assert!(status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("ID "), "{stdout}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("ID ")).count(),
        1,
        "{stdout}"
    );
    // One row for the job already done, then one per state of the new one, in order.
    assert_eq!(states_of(&stdout, &before, 2), ["SUCCEEDED"], "{stdout}");
    // A row per change (a new reason or message too), the states in lifecycle order (QUEUED
    // may pass before the watch sees the Job).
    let mut states = states_of(&stdout, &id, 2);
    states.dedup();
    assert!(
        states == ["QUEUED", "STARTED", "SUCCEEDED"] || states == ["STARTED", "SUCCEEDED"],
        "{stdout}"
    );
    let rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with(&id))
        .collect();
    let order: Vec<usize> = (0..rows.len()).collect();
    assert!(
        order.windows(2).all(|w| rows[w[0]] != rows[w[1]]),
        "{stdout}"
    );
}

#[tokio::test]
async fn status_watch_until_done_ends_with_the_jobs_and_their_outcome() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let gate = cluster.dir.path().join("gate");
    let job = gated_job(cluster.dir.path(), "watched", &gate)
        .display()
        .to_string();
    let id = submit(kubeconfig, &job, &[]).await;
    let watch = Spawned::start(kubeferry(kubeconfig).args([
        "status",
        "-w",
        "--until-done",
        &id,
        "-o",
        "jsonpath={.state}{\"\\n\"}",
    ]));
    watch
        .until("a first row", |out, _| out.lines().count() >= 1)
        .await;
    std::fs::write(&gate, b"").unwrap();
    let (status, stdout, _) = watch.finish().await;
    assert!(status.success(), "{stdout}");
    let states: Vec<&str> = stdout.lines().collect();
    assert_eq!(states.last(), Some(&"SUCCEEDED"), "{stdout}");
    assert!(
        states
            .iter()
            .all(|s| ["QUEUED", "STARTED", "SUCCEEDED"].contains(s)),
        "{stdout}"
    );
    let life = ["QUEUED", "STARTED", "SUCCEEDED"];
    let order: Vec<usize> = states
        .iter()
        .map(|s| life.iter().position(|l| l == s).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{stdout}");

    // A failed job: exit 1 once it ends.
    let failed = submit(kubeconfig, &example("fail.yaml"), &[]).await;
    let output = run(kubeferry(kubeconfig).args(["status", "-w", "--until-done", &failed])).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert_eq!(
        states_of(&stdout, &failed, 1).last().map(String::as_str),
        Some("FAILED"),
        "{stdout}"
    );
}

#[tokio::test]
async fn list_watch_refuses_every_namespace() {
    let cluster = cluster().await;
    let output = run(kubeferry(&cluster.kubeconfig).args(["list", "-w", "-A"])).await;
    // A usage error: exit 2, as clap's own.
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("name it with -n"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn a_job_files_problems_come_all_at_once_with_suggestions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "name: Bad_Name\nimage: busybox\nresources: {cpu: 1x, memory: 1Gi, qos: Guarantee}\ncomand: [echo]\n",
    )
    .unwrap();
    let shown = file.display().to_string();
    // Refused before any cluster is looked for.
    let output = run(Command::new(binary())
        .args(["submit", "-f", &shown])
        .env("KUBECONFIG", dir.path().join("none")))
    .await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "error: {shown}:1:7: name: \"Bad_Name\" is not a DNS-1123 label"
        )),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{shown}:3:18: resources.cpu: \"1x\" is not a Kubernetes quantity"
        )),
        "{stderr}"
    );
    assert_eq!(
        lines[2],
        format!(
            "{shown}:3:40: resources.qos: \"Guarantee\" is not one of Burstable, Guaranteed; did you mean Guaranteed?"
        )
    );
    assert_eq!(
        lines[3],
        format!("{shown}:4:1: unknown field `comand`; did you mean `command`?")
    );
}

/// A `kubeferry` whose stdout and stderr are a pseudo-terminal (120 columns), as in a
/// terminal window; everything it draws is collected as it comes.
struct OnTerminal {
    child: tokio::process::Child,
    transcript: Arc<Mutex<Vec<u8>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl OnTerminal {
    fn start(command: &mut Command) -> OnTerminal {
        let size = nix::pty::Winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).expect("a pseudo-terminal");
        let err = pty.slave.try_clone().unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::from(pty.slave))
            .stderr(Stdio::from(err))
            .env("TERM", "xterm")
            .spawn()
            .expect("kubeferry starts");
        let transcript = Arc::new(Mutex::new(Vec::new()));
        let into = transcript.clone();
        let mut terminal = std::fs::File::from(pty.master);
        // Reads until the last writer is gone (EIO on Linux).
        let reader = tokio::task::spawn_blocking(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut terminal, &mut buf) {
                if n == 0 {
                    return;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        OnTerminal {
            child,
            transcript,
            reader,
        }
    }

    fn text(&self) -> String {
        text(&self.transcript.lock().unwrap())
    }

    async fn until(&self, what: &str, accept: impl Fn(&str) -> bool) {
        let end = tokio::time::Instant::now() + DEADLINE;
        while !accept(&self.text()) {
            assert!(
                tokio::time::Instant::now() < end,
                "timed out waiting for {what}; the terminal shows:\n{:?}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn finish(mut self) -> (ExitStatus, String) {
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("kubeferry ended")
            .unwrap();
        let _ = tokio::time::timeout(DEADLINE, &mut self.reader).await;
        (status, self.text())
    }
}

/// The frames of the live line: what each carriage return redraws.
fn frames(transcript: &str) -> Vec<String> {
    transcript
        .split('\r')
        .map(|frame| frame.trim_start_matches("\x1b[2K").to_string())
        .filter(|frame| !frame.trim().is_empty())
        .collect()
}

/// Whether the text has colour (SGR) escape sequences.
fn coloured(text: &str) -> bool {
    text.contains("\x1b[1m") || text.contains("\x1b[36m") || text.contains("\x1b[2m")
}

#[tokio::test]
async fn run_on_a_terminal_draws_one_live_line_with_the_log_above_it() {
    let cluster = cluster().await;
    let running = OnTerminal::start(kubeferry(&cluster.kubeconfig).args([
        "run",
        "-f",
        &example("hello.yaml"),
    ]));
    let (status, screen) = running.finish().await;
    assert!(status.success(), "{screen:?}");
    let frames = frames(&screen);
    // The live line is redrawn in place (carriage return, erase line), never a plain
    // progress line.
    assert!(screen.contains("\r\x1b[2K"), "{screen:?}");
    assert!(!screen.contains(" STARTED (Running)"), "{screen:?}");
    let started = frames
        .iter()
        .find(|f| {
            f.contains("STARTED")
                && f.contains("Running · pod hello-")
                && f.contains(" on sim-node-")
        })
        .unwrap_or_else(|| panic!("no STARTED frame with its pod and node: {frames:#?}"));
    assert!(coloured(started), "{started:?}");
    assert!(
        started.contains("0s") || started.contains("1s") || started.contains("2s"),
        "the elapsed time: {started:?}"
    );
    // The log's lines are whole lines above the live line, in order, and the summary ends it.
    let lines: Vec<&str> = screen
        .split("\r\n")
        .map(|line| line.rsplit("\x1b[2K").next().unwrap())
        .collect();
    let log: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            [
                "hello from kubeferry",
                "streaming: this line came a second later",
                "done",
            ]
            .contains(l)
        })
        .collect();
    assert_eq!(
        log,
        [
            "hello from kubeferry",
            "streaming: this line came a second later",
            "done"
        ],
        "{screen:?}"
    );
    let last = lines.iter().rev().find(|l| !l.is_empty()).unwrap();
    assert!(
        last.contains(" SUCCEEDED (Completed, exit code 0"),
        "{screen:?}"
    );
}

#[tokio::test]
async fn wait_on_a_terminal_shows_why_a_job_is_queued_and_respects_no_color_and_no_progress() {
    let cluster = cluster().await;
    let file = cluster.dir.path().join("huge.yaml");
    std::fs::write(
        &file,
        "name: huge\nimage: busybox\ncommand: [sleep, '60']\nresources: {cpu: 1000}\n",
    )
    .unwrap();
    let id = submit(&cluster.kubeconfig, &file.display().to_string(), &[]).await;
    let waiting = OnTerminal::start(
        kubeferry(&cluster.kubeconfig)
            .args(["wait", &id])
            .env("NO_COLOR", "1"),
    );
    waiting
        .until("the unschedulable frame", |screen| {
            frames(screen)
                .iter()
                .any(|f| f.contains("QUEUED") && f.contains("Unschedulable: 0/"))
        })
        .await;
    // The same on a terminal with --no-progress: plain lines.
    let plain =
        OnTerminal::start(kubeferry(&cluster.kubeconfig).args(["wait", &id, "--no-progress"]));
    plain
        .until("the plain line", |screen| {
            screen.contains(&format!("kubeferry: {id} QUEUED (Unschedulable): 0/"))
        })
        .await;
    ok(kubeferry(&cluster.kubeconfig).args(["cancel", &id])).await;
    let (status, screen) = waiting.finish().await;
    assert_eq!(status.code(), Some(1), "{screen:?}");
    assert!(!coloured(&screen), "NO_COLOR: {screen:?}");
    let frame = frames(&screen)
        .into_iter()
        .find(|f| f.contains("Unschedulable: 0/"))
        .unwrap();
    assert!(frame.contains("QUEUED "), "{frame:?}");
    assert!(
        screen.contains(&format!("{id} CANCELLED (Cancelled")),
        "{screen:?}"
    );
    let (status, screen) = plain.finish().await;
    assert_eq!(status.code(), Some(1));
    assert!(
        !screen.contains("\x1b["),
        "--no-progress draws nothing: {screen:?}"
    );
}

#[tokio::test]
async fn run_off_a_terminal_prints_the_plain_lines() {
    let cluster = cluster().await;
    let output =
        run(kubeferry(&cluster.kubeconfig).args(["run", "-f", &example("hello.yaml")])).await;
    assert!(output.status.success());
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        !stdout.contains('\x1b') && !stderr.contains('\x1b') && !stderr.contains('\r'),
        "{stderr:?}"
    );
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("kubeferry: submitted "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    // Every change is a line of its own, as before the live line existed.
    assert!(
        stderr.contains(&format!("kubeferry: {id} STARTED (Running)\n")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("kubeferry: {id} SUCCEEDED (Completed)\n")),
        "{stderr}"
    );
    assert_eq!(stdout.lines().next(), Some("hello from kubeferry"));
}

#[tokio::test]
async fn list_all_namespaces_without_cluster_wide_rights_says_what_to_grant() {
    let mut config = SimConfig::for_tests();
    config.rbac = true;
    let sim = SimCluster::start(config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin.kubeconfig");
    sim.write_kubeconfig_as(&admin, "test", sim.admin_token())
        .unwrap();
    let role = ok(kubeferry(&admin).args([
        "rbac",
        "-n",
        "default",
        "--service-account",
        "local",
        "-o",
        "json",
    ]))
    .await;
    let role: Value = serde_json::from_str(&role).unwrap();
    for item in role["items"].as_array().unwrap() {
        sim.create("default", item.clone()).unwrap();
    }
    let limited = dir.path().join("local.kubeconfig");
    sim.write_kubeconfig_as(&limited, "test", &sim.token_for("default", "local"))
        .unwrap();
    let id = submit(&limited, &example("hello.yaml"), &[]).await;
    // The namespace's Role is enough for a namespace's list, not for every namespace's.
    assert_eq!(
        ok(kubeferry(&limited).args(["list", "-o", "name"])).await,
        format!("{id}\n")
    );
    let output = run(kubeferry(&limited).args(["list", "-A"])).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: forbidden: kubeferry needs permission to list jobs.batch in all namespaces (a ClusterRole bound with a ClusterRoleBinding)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn list_watch_wide_rows_show_where_the_job_runs() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let watch = Spawned::start(kubeferry(kubeconfig).args(["list", "-w", "-o", "wide"]));
    let id = submit(kubeconfig, &example("hello.yaml"), &[]).await;
    let name = id.rsplit('/').next().unwrap().to_string();
    watch
        .until("a SUCCEEDED row with its pod and node", |out, _| {
            out.lines().any(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                words.first() == Some(&id.as_str())
                    && words.contains(&"SUCCEEDED")
                    && words.iter().any(|w| w.starts_with(&format!("{name}-")))
                    && words.iter().any(|w| w.starts_with("sim-node-"))
            })
        })
        .await;
    watch.interrupt();
    let (status, stdout, _) = watch.finish().await;
    assert!(status.success(), "{stdout}");
    assert!(
        stdout.starts_with("ID "),
        "the header comes with the first row: {stdout}"
    );
}

#[tokio::test]
async fn list_watch_until_done_ends_when_every_job_has() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let gate = cluster.dir.path().join("gate");
    let job = gated_job(cluster.dir.path(), "gated", &gate)
        .display()
        .to_string();
    let gated = submit(kubeconfig, &job, &["-n", "team"]).await;
    let watch = Spawned::start(kubeferry(kubeconfig).args([
        "list",
        "-n",
        "team",
        "-w",
        "--until-done",
        "-o",
        "jsonpath={.job.id} {.job.state}{\"\\n\"}",
    ]));
    watch
        .until("the listed job", |out, _| out.contains(&gated))
        .await;
    std::fs::write(&gate, b"").unwrap();
    let (status, stdout, _) = watch.finish().await;
    assert!(status.success(), "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some(format!("{gated} SUCCEEDED").as_str()),
        "{stdout}"
    );
    // A failed job among them: exit 1.
    let failed = submit(kubeconfig, &example("fail.yaml"), &["-n", "team"]).await;
    wait(kubeconfig, &failed).await;
    let output =
        run(kubeferry(kubeconfig).args(["list", "-n", "team", "-w", "--until-done", "-o", "name"]))
            .await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let mut names: Vec<String> = text(&output.stdout).lines().map(String::from).collect();
    names.sort();
    let mut both = [gated, failed];
    both.sort();
    assert_eq!(names, both);
}

/// Submits a job file under a job id, with flags; its execution id.
async fn submit_as(kubeconfig: &Path, file: &str, job_id: &str, flags: &[&str]) -> String {
    ok(kubeferry(kubeconfig)
        .args(["submit", "-f", file, "--job-id", job_id])
        .args(flags))
    .await
    .trim()
    .to_string()
}

/// Runs and checks the exit code; stdout and stderr.
async fn exits(command: &mut Command, code: i32) -> (String, String) {
    let output = run(command).await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(code),
        "{command:?}:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

#[tokio::test]
async fn a_job_id_names_its_job_for_status_logs_wait_and_cancel() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let id = submit_as(
        kubeconfig,
        &example("hello.yaml"),
        "nightly-7",
        &["-n", "team"],
    )
    .await;
    let by_job_id = ["--job-id", "nightly-7", "-n", "team"];
    let done = ok(kubeferry(kubeconfig)
        .args(["wait", "--timeout", "30s"])
        .args(by_job_id))
    .await;
    assert!(done.starts_with(&format!("{id} SUCCEEDED")), "{done}");
    let status: Value = serde_json::from_str(
        &ok(kubeferry(kubeconfig)
            .args(["status", "-o", "json"])
            .args(by_job_id))
        .await,
    )
    .unwrap();
    assert_eq!(status["id"], id.as_str());
    assert_eq!(status["jobId"], "nightly-7");
    assert_eq!(status["state"], "SUCCEEDED");
    let log = ok(kubeferry(kubeconfig)
        .args(["logs", "--tail", "1"])
        .args(by_job_id))
    .await;
    assert_eq!(log, "done\n");
    let (_, stderr) = exits(kubeferry(kubeconfig).args(["cancel"]).args(by_job_id), 0).await;
    assert!(stderr.contains("had already ended"), "{stderr}");

    // Elsewhere, or of another kind, the job id names nothing: one clear error, exit 1.
    let (_, stderr) = exits(
        kubeferry(kubeconfig).args(["status", "--job-id", "nightly-7"]),
        1,
    )
    .await;
    assert_eq!(
        stderr,
        "error: no job with job id \"nightly-7\" in namespace \"default\"\n"
    );
    let (_, stderr) = exits(
        kubeferry(kubeconfig)
            .args(["logs", "--kind", "sparkapp"])
            .args(by_job_id),
        1,
    )
    .await;
    assert!(
        stderr.contains("no job with job id \"nightly-7\" of kind sparkapp in namespace \"team\""),
        "{stderr}"
    );
    // An execution id and a job id at once, or neither: usage errors.
    for args in [
        vec!["status", id.as_str(), "--job-id", "nightly-7"],
        vec!["wait"],
        vec!["cancel", "--kind", "job"],
        vec!["status", "--job-id", "x", "--kind", "cronjob"],
    ] {
        exits(kubeferry(kubeconfig).args(&args), 2).await;
    }
}

#[tokio::test]
async fn a_job_id_that_already_ran_is_not_run_again_and_says_so() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let fail = example("fail.yaml");
    let run_once = ["run", "-f", &fail, "--job-id", "once-1", "--no-progress"];
    let (first, stderr) = exits(kubeferry(kubeconfig).args(run_once), 3).await;
    assert!(stderr.contains("submitted "), "{stderr}");
    let status: Value = serde_json::from_str(
        &ok(kubeferry(kubeconfig).args(["status", "--job-id", "once-1", "-o", "json"])).await,
    )
    .unwrap();
    let finished = status["finishedAt"].as_str().unwrap();

    // Again: nothing created; that run's outcome, log and exit code.
    let (again, stderr) = exits(kubeferry(kubeconfig).args(run_once), 3).await;
    assert!(
        stderr.contains(&format!(
            "kubeferry: job id once-1 already ran: FAILED at {finished}; not run again"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("submitted "), "{stderr}");
    assert!(again.contains("about to fail"), "{again}");
    assert_eq!(again.lines().last(), first.lines().last(), "{again}");
    assert_eq!(cluster.sim.count("batch", "jobs"), 1);

    // submit says so too, and -o json has `existing`.
    let output = run(
        kubeferry(kubeconfig).args(["submit", "-f", &fail, "--job-id", "once-1", "-o", "json"])
    )
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("job id once-1 already ran: FAILED at "),
        "{}",
        text(&output.stderr)
    );
    let submitted: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(submitted["existing"], true);
    assert_eq!(submitted["jobId"], "once-1");
    let fresh: Value =
        serde_json::from_str(
            &ok(kubeferry(kubeconfig)
                .args(["submit", "-f", &fail, "--job-id", "once-2", "-o", "json"]))
            .await,
        )
        .unwrap();
    assert_eq!(fresh["existing"], false);

    // A job id still running: it says so, and runs nothing new.
    let gate = cluster.dir.path().join("gate");
    let gated = gated_job(cluster.dir.path(), "gated", &gate)
        .display()
        .to_string();
    let id = submit_as(kubeconfig, &gated, "running-1", &[]).await;
    let _started = eventually_started(kubeconfig, &id).await;
    let output =
        run(kubeferry(kubeconfig).args(["submit", "-f", &gated, "--job-id", "running-1"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), format!("{id}\n"));
    assert!(
        text(&output.stderr).contains("job id running-1 is already running (STARTED since "),
        "{}",
        text(&output.stderr)
    );
    std::fs::write(&gate, b"").unwrap();
    wait(kubeconfig, &id).await;
}

/// Waits until a job is STARTED; its status.
async fn eventually_started(kubeconfig: &Path, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let status: Value = serde_json::from_str(
            &ok(kubeferry(kubeconfig).args(["status", id, "-o", "json"])).await,
        )
        .unwrap();
        if status["state"] == "STARTED" {
            return status;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a time is as every answer gives it: RFC 3339 in UTC, to the second.
fn to_the_second(time: &Value) -> bool {
    time.as_str()
        .is_some_and(|t| t.len() == 20 && t.ends_with('Z') && t.parse::<jiff::Timestamp>().is_ok())
}

#[tokio::test]
async fn status_and_list_print_the_services_job_json_with_times_to_the_second() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let id = submit_as(kubeconfig, &example("fail.yaml"), "shape-1", &[]).await;
    wait(kubeconfig, &id).await;

    let status: Value =
        serde_json::from_str(&ok(kubeferry(kubeconfig).args(["status", &id, "-o", "json"])).await)
            .unwrap();
    assert_eq!(status["failureClass"], "user", "{status}");
    assert!(to_the_second(&status["startedAt"]), "{status}");
    assert!(to_the_second(&status["finishedAt"]), "{status}");
    let by_job_id: Value = serde_json::from_str(
        &ok(kubeferry(kubeconfig).args(["status", "--job-id", "shape-1", "-o", "json"])).await,
    )
    .unwrap();
    assert_eq!(by_job_id["jobId"], "shape-1");

    // list -o json: {"items": [...]}, each item the service's, its job the status's fields.
    let list: Value =
        serde_json::from_str(&ok(kubeferry(kubeconfig).args(["list", "-o", "json"])).await)
            .unwrap();
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["jobId"], "shape-1");
    assert!(to_the_second(&items[0]["createdAt"]), "{list}");
    assert_eq!(items[0]["job"], by_job_id, "{list}");
    // Several statuses: items too.
    let statuses: Value = serde_json::from_str(
        &ok(kubeferry(kubeconfig).args(["status", &id, &id, "-o", "json"])).await,
    )
    .unwrap();
    assert_eq!(statuses["items"][1]["id"], id.as_str(), "{statuses}");

    // The table gives the same times.
    let table = ok(kubeferry(kubeconfig).args(["status", &id])).await;
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[4], status["startedAt"].as_str().unwrap(), "{table}");
    assert_eq!(row[5], status["finishedAt"].as_str().unwrap(), "{table}");
}

#[tokio::test]
async fn watch_rows_stay_under_their_headers() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let gate = cluster.dir.path().join("gate");
    let job = gated_job(cluster.dir.path(), "aligned", &gate)
        .display()
        .to_string();
    let id = submit(kubeconfig, &job, &[]).await;
    for command in [vec!["list", "-w"], vec!["status", "-w", &id]] {
        let watch = Spawned::start(kubeferry(kubeconfig).args(&command));
        watch
            .until("the first row", |out, _| out.contains(&id))
            .await;
        if command[0] == "status" {
            std::fs::write(&gate, b"").unwrap();
            watch
                .until("the SUCCEEDED row", |out, _| {
                    out.lines().any(|l| l.contains(" SUCCEEDED "))
                })
                .await;
        }
        watch.interrupt();
        let (_, stdout, _) = watch.finish().await;
        let lines: Vec<&str> = stdout.lines().collect();
        let header = lines[0];
        // Each header's column starts where its values start, in every row (EXIT may be
        // empty, but nothing before it reaches into it).
        for name in ["STATE", "REASON", "EXIT"] {
            let at = header.find(name).unwrap();
            for row in &lines[1..] {
                assert!(row[..at].ends_with(' '), "{name} at {at}:\n{stdout}");
                if name != "EXIT" {
                    assert!(!row[at..].starts_with(' '), "{name} at {at}:\n{stdout}");
                }
            }
        }
        if command[0] == "status" {
            let at = header.find("FINISHED").unwrap();
            let last = lines.last().unwrap();
            assert!(last[at..].starts_with("20"), "FINISHED:\n{stdout}");
        }
    }
}

#[tokio::test]
async fn exit_codes_say_timeout_usage_and_a_closed_pipe() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let gate = cluster.dir.path().join("gate");
    let job = gated_job(cluster.dir.path(), "slow", &gate)
        .display()
        .to_string();
    let id = submit(kubeconfig, &job, &[]).await;
    // wait --timeout that runs out: 124, not a failed job's 1; the job keeps running.
    let (_, stderr) = exits(
        kubeferry(kubeconfig).args(["wait", &id, "--timeout", "200ms"]),
        124,
    )
    .await;
    assert!(stderr.contains("timed out"), "{stderr}");
    let help = ok(kubeferry(kubeconfig).args(["wait", "--help"])).await;
    assert!(help.contains("124"), "{help}");

    // Every usage error exits 2.
    let usage: Vec<Vec<&str>> = vec![
        vec!["list", "-A", "-w"],
        vec!["logs", &id, "-f", "--previous"],
        vec!["logs", &id, "-f", "--limit-bytes", "3"],
        vec!["logs", &id, "--limit-bytes", "3", "--tail-bytes", "3"],
        vec!["status", "not-an-id"],
        vec!["status", "test/cronjob/default/x"],
        vec!["status", "--until-done", &id],
    ];
    for args in usage {
        exits(kubeferry(kubeconfig).args(&args), 2).await;
    }
    // A list of kinds names every kind.
    let (_, stderr) = exits(
        kubeferry(kubeconfig).args(["cancel", "test/cronjob/default/x"]),
        2,
    )
    .await;
    assert!(
        stderr.contains("expected one of job, sparkapp, jobset, pod"),
        "{stderr}"
    );
    std::fs::write(&gate, b"").unwrap();
    wait(kubeconfig, &id).await;

    // A reader that went away: quiet, exit 0, as kubectl.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = run(kubeferry(kubeconfig)
        .args(["list", "-o", "name"])
        .stdout(Stdio::from(writer)))
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stderr), "");
}

#[tokio::test]
async fn logs_limit_bytes_keeps_the_first_bytes_and_tail_bytes_the_last() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let job = shell_job(cluster.dir.path(), "words", "echo hello; echo world")
        .display()
        .to_string();
    let id = submit(kubeconfig, &job, &[]).await;
    wait(kubeconfig, &id).await;
    let logs = |flags: &'static [&'static str]| {
        let mut command = kubeferry(kubeconfig);
        command.args(["logs", &id]).args(flags);
        command
    };
    assert_eq!(ok(&mut logs(&[])).await, "hello\nworld\n");
    assert_eq!(ok(&mut logs(&["--limit-bytes", "7"])).await, "hello\nw");
    assert_eq!(ok(&mut logs(&["--tail-bytes", "6"])).await, "world\n");
    assert_eq!(
        ok(&mut logs(&["--tail", "1", "--limit-bytes", "3"])).await,
        "wor"
    );
}

#[tokio::test]
async fn logs_is_never_silently_empty_and_a_part_the_job_lacks_is_a_usage_error() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let dir = cluster.dir.path();
    let job = shell_job(dir, "last-words", "echo first; echo last; exit 3")
        .display()
        .to_string();
    let id = submit(kubeconfig, &job, &[]).await;
    let _ = run(kubeferry(kubeconfig).args(["wait", &id])).await;
    // A container that printed something: its log, no warning.
    let output = run(kubeferry(kubeconfig).args(["logs", &id])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "first\nlast\n");
    assert_eq!(text(&output.stderr), "");
    // --previous of a job that ran once says so, on stderr.
    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--previous"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "");
    assert_eq!(
        text(&output.stderr),
        "warning: no earlier attempt to read: --previous shows the attempt before the newest (drop \
         it for the newest's log)\n"
    );
    // An index of a job that has none: a usage error.
    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--index", "9"])).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stderr),
        format!(
            "error: {id} has no index 9: it is not an indexed job; see --index and --replica\n"
        )
    );
    // Its Job and pods deleted by someone else: the last words kept with its outcome, from
    // the log and from a follow, each saying where they come from.
    let parts: Vec<&str> = id.split('/').collect();
    let deleted = run(Command::new("kubectl").env("KUBECONFIG", kubeconfig).args([
        "delete",
        "job",
        "-n",
        parts[2],
        parts[3],
        "--wait=true",
    ]))
    .await;
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    for flags in [&[][..], &["-f"][..]] {
        let output = run(kubeferry(kubeconfig).args(["logs", &id]).args(flags)).await;
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert_eq!(text(&output.stdout), "first\nlast\n", "{flags:?}");
        assert_eq!(
            text(&output.stderr),
            "warning: the job's pod is gone (FAILED Error); these are its last words, kept with \
             its outcome\n",
            "{flags:?}"
        );
    }
}

#[tokio::test]
async fn every_help_has_examples_and_points_at_the_guide() {
    let commands: Vec<Vec<&str>> = vec![
        vec![],
        vec!["run"],
        vec!["submit"],
        vec!["status"],
        vec!["wait"],
        vec!["cancel"],
        vec!["logs"],
        vec!["list"],
        vec!["sweep"],
        vec!["rbac"],
        vec!["completion"],
        vec!["template"],
        vec!["serve"],
        vec!["sim"],
    ];
    for command in commands {
        let help = ok(Command::new(binary()).args(&command).arg("--help")).await;
        let first = help.lines().next().unwrap_or_default();
        assert!(
            !first.is_empty()
                && first.ends_with(|c: char| c.is_alphanumeric() || c == ')' || c == '.'),
            "{command:?}: a one-line summary first:\n{help}"
        );
        assert!(
            help.contains("\nExamples:\n  kubeferry "),
            "{command:?}:\n{help}"
        );
        assert!(
            help.trim_end()
                .ends_with("Guide: docs/README.md in the kubeferry repository."),
            "{command:?}:\n{help}"
        );
    }
    let help = ok(Command::new(binary()).args(["status", "--help"])).await;
    assert!(
        help.contains("--job-id <JOB_ID>") && help.contains("--kind <KIND>"),
        "{help}"
    );
    let help = ok(Command::new(binary()).args(["logs", "--help"])).await;
    assert!(help.contains("--tail-bytes <N>"), "{help}");
    assert!(
        help.contains("Only the first N bytes, as kubectl's --limit-bytes"),
        "{help}"
    );
}

#[tokio::test]
async fn a_job_id_answers_once_its_job_is_gone_from_its_outcome_record() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let gate = cluster.dir.path().join("gate");
    let job = gated_job(cluster.dir.path(), "doomed", &gate)
        .display()
        .to_string();
    let id = submit_as(kubeconfig, &job, "doomed-1", &[]).await;
    ok(kubeferry(kubeconfig).args(["cancel", "--job-id", "doomed-1", "--wait"])).await;
    // The Job is deleted on cancel, held by kubeferry's finalizer until a settler lets it go:
    // let go of it here, and only its outcome record is left.
    ok(kubeferry(kubeconfig).args(["sweep", "--release"])).await;
    assert_eq!(cluster.sim.count("batch", "jobs"), 0);
    let status: Value = serde_json::from_str(
        &ok(kubeferry(kubeconfig).args(["status", "--job-id", "doomed-1", "-o", "json"])).await,
    )
    .unwrap();
    assert_eq!(status["id"], id.as_str());
    assert_eq!(status["state"], "CANCELLED");
    assert_eq!(status["jobId"], "doomed-1");
    // A list shows it too, from the same record.
    let listed = ok(kubeferry(kubeconfig).args(["list", "--state", "CANCELLED"])).await;
    let rows: Vec<&str> = listed.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{listed}");
    assert!(rows[0].starts_with(&format!("{id} ")), "{listed}");
    assert!(rows[0].contains(" CANCELLED "), "{listed}");
    let listed: Value =
        serde_json::from_str(&ok(kubeferry(kubeconfig).args(["list", "-o", "json"])).await)
            .unwrap();
    assert_eq!(listed["items"][0]["job"]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["items"][0]["job"]["state"], "CANCELLED", "{listed}");
    assert!(listed["items"][0]["createdAt"].is_string(), "{listed}");
}

#[tokio::test]
async fn a_dry_run_prints_the_objects_and_creates_nothing() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let hello = example("hello.yaml");
    let dry = |command: &str, mode: &str, output: &[&str]| {
        let mut args = vec![command, "-f", &hello, "--job-id", "dry-1", mode];
        args.extend_from_slice(output);
        let mut command = kubeferry(kubeconfig);
        command.args(args);
        command
    };
    // Client: the Job as kubeferry builds it, ready for kubectl apply.
    let yaml = ok(&mut dry("submit", "--dry-run=client", &["-o", "yaml"])).await;
    assert!(
        yaml.starts_with("---\napiVersion: batch/v1\nkind: Job\n"),
        "{yaml}"
    );
    assert!(yaml.contains("kubeferry.dev/job-id: dry-1"), "{yaml}");
    // Server: as the API server would store it.
    let json = ok(&mut dry("submit", "--dry-run=server", &["-o", "json"])).await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["kind"], "Job");
    assert!(json["metadata"]["uid"].is_string(), "{json}");
    let name = json["metadata"]["name"].as_str().unwrap().to_string();
    // Without -o, a line per object, as kubectl says it; run takes it too.
    let line = ok(&mut dry("run", "--dry-run=server", &[])).await;
    assert_eq!(line, format!("job.batch/{name} created (server dry run)\n"));
    let line = ok(&mut dry("submit", "--dry-run=client", &[])).await;
    assert_eq!(line, format!("job.batch/{name} created (dry run)\n"));
    assert_eq!(cluster.sim.count("batch", "jobs"), 0);
    // What the server refuses is the error, exit 1; a mode that is none of them, exit 2.
    let (_, stderr) = exits(
        kubeferry(kubeconfig).args(["submit", "-f", &hello, "-n", "nowhere", "--dry-run=server"]),
        1,
    )
    .await;
    assert!(stderr.contains("nowhere"), "{stderr}");
    let (_, stderr) = exits(
        kubeferry(kubeconfig).args(["submit", "-f", &hello, "--dry-run=maybe"]),
        2,
    )
    .await;
    assert!(stderr.contains("--dry-run"), "{stderr}");
    assert_eq!(cluster.sim.count("batch", "jobs"), 0);
}

#[tokio::test]
async fn describe_tells_a_failed_jobs_story_in_80_columns_and_as_json() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let id = submit_as(kubeconfig, &example("fail.yaml"), "told-1", &[]).await;
    exits(kubeferry(kubeconfig).args(["wait", &id]), 3).await;
    let told = ok(kubeferry(kubeconfig).args(["describe", "--job-id", "told-1"])).await;
    let lines: Vec<&str> = told.lines().collect();
    assert_eq!(lines[0], format!("ID:      {id}"), "{told}");
    assert_eq!(lines[1], "Job id:  told-1", "{told}");
    assert!(
        lines[2].starts_with("State:   FAILED (Error, exit code 3, user failure)"),
        "{told}"
    );
    assert!(
        lines.iter().all(|line| line.chars().count() <= 80),
        "{told}"
    );
    let table: Vec<&str> = lines
        .iter()
        .copied()
        .skip_while(|line| !line.starts_with("TIME "))
        .take_while(|line| !line.is_empty())
        .collect();
    let steps: Vec<&str> = table
        .iter()
        .skip(1)
        .map(|row| row.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(steps.first(), Some(&"Submitted"), "{told}");
    assert_eq!(steps.last(), Some(&"FAILED"), "{told}");
    assert!(
        steps.contains(&"Started") && steps.contains(&"Ended"),
        "{told}"
    );
    assert!(table[1].split_whitespace().nth(1) == Some("+0s"), "{told}");
    assert!(told.contains("\nWhere the time went: waiting "), "{told}");
    assert!(
        told.ends_with(&format!(
            "What to do: read its log: kubeferry logs {id}\n            (--previous for the \
             attempt before)\n"
        )),
        "{told}"
    );
    let json: Value = serde_json::from_str(
        &ok(kubeferry(kubeconfig).args(["describe", &id, "-o", "json"])).await,
    )
    .unwrap();
    assert_eq!(json["id"], id.as_str());
    assert_eq!(json["jobId"], "told-1");
    assert_eq!(json["status"]["exitCode"], 3);
    assert_eq!(json["steps"][0]["what"], "Submitted");
    assert!(json["spent"]["running"].is_number(), "{json}");
    assert!(json["whatToDo"].is_string(), "{json}");
    // No such job: the usual error, exit 1.
    exits(
        kubeferry(kubeconfig).args(["describe", "test/job/default/nope"]),
        1,
    )
    .await;
}
