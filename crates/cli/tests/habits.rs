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
    let template = r#"jsonpath={range .items[*]}{.id} {.status.state} {.status.exitCode} {.status.reason}{"\n"}{end}"#;
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
        "jsonpath={.items[*].status.state}",
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
    for (line, job) in lines[1..].iter().zip(json.as_array().unwrap()) {
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
                job["id"].as_str().unwrap().split('/').nth(2).unwrap(),
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
    assert_eq!(output.status.code(), Some(1));
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
        "jsonpath={.id} {.status.state}{\"\\n\"}",
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
