//! The real `kubectl` against the simulated cluster (skipped, with a printed reason, only when
//! kubectl is not installed).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Sim, eventually, shell_job, start, start_with};
use kubeferry_sim::{SimCluster, SimConfig};

fn kubectl_present() -> bool {
    let present = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok();
    if !present {
        eprintln!("skipping: kubectl is not installed");
    }
    present
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Writes the cluster's kubeconfig to a fresh temporary file.
fn kubeconfig(cluster: &SimCluster) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kubeferry-sim-kubectl-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("kubeconfig");
    cluster.write_kubeconfig(&path).expect("kubeconfig written");
    path
}

struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Writes a manifest next to the kubeconfig and returns its path.
    fn manifest(&self, name: &str, yaml: &str) -> String {
        let path = self.kubeconfig.with_file_name(name);
        std::fs::write(&path, yaml).expect("manifest written");
        path.display().to_string()
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args);
        assert!(ok, "kubectl {args:?} failed: {stderr}");
        stdout
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        if let Some(dir) = self.kubeconfig.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

async fn setup() -> Option<(Sim, Kubectl)> {
    setup_with(None).await
}

async fn setup_with(config: Option<SimConfig>) -> Option<(Sim, Kubectl)> {
    if !kubectl_present() {
        return None;
    }
    let sim = match config {
        Some(c) => start_with(c).await,
        None => start().await,
    };
    let kubectl = Kubectl {
        kubeconfig: kubeconfig(&sim.cluster),
    };
    Some((sim, kubectl))
}

async fn job_finished(sim: &Sim, name: &str) {
    eventually(
        &format!("{name} to complete"),
        Duration::from_secs(10),
        || {
            let cluster = &sim.cluster;
            async move {
                let job = cluster.object("batch", "jobs", "default", name)?;
                let done = job["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True");
                done.then_some(())
            }
        },
    )
    .await;
}

const JOB: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: hello
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: [sh, -c, 'echo one; sleep 0.3; echo two; echo three']
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_describe_logs_and_wait() {
    let Some((sim, kubectl)) = setup().await else {
        return;
    };
    let path = kubectl.manifest("job.yaml", JOB);
    assert_eq!(
        kubectl.ok(&["create", "-f", &path]),
        "job.batch/hello created\n"
    );
    let followed = kubectl.ok(&["logs", "-f", "job/hello"]);
    assert_eq!(followed, "one\ntwo\nthree\n");
    assert_eq!(
        kubectl.ok(&[
            "wait",
            "--for=condition=complete",
            "job/hello",
            "--timeout=10s"
        ]),
        "job.batch/hello condition met\n"
    );
    job_finished(&sim, "hello").await;
    assert_eq!(kubectl.ok(&["logs", "--tail=1", "job/hello"]), "three\n");
    let listing = kubectl.ok(&["get", "jobs,pods", "-A"]);
    let lines: Vec<&str> = listing.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("NAMESPACE")
            && l.contains("STATUS")
            && l.contains("COMPLETIONS")),
        "{listing}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("job.batch/hello") && l.contains("Complete") && l.contains("1/1")),
        "{listing}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("pod/hello-") && l.contains("0/1") && l.contains("Completed")),
        "{listing}"
    );
    let wide = kubectl.ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.contains("sim-node-1") && wide.contains("10.244."),
        "{wide}"
    );
    let described = kubectl.ok(&["describe", "job", "hello"]);
    assert!(
        described.contains("Pods Statuses:    0 Active (0 Ready) / 1 Succeeded / 0 Failed"),
        "{described}"
    );
    assert!(
        described.contains("SuccessfulCreate") && described.contains("Completed"),
        "{described}"
    );
    let pod = kubectl.ok(&["describe", "pod", "-l", "job-name=hello"]);
    assert!(
        pod.contains("Status:           Succeeded") && pod.contains("Exit Code:    0"),
        "{pod}"
    );
    assert!(pod.contains("Started container main"), "{pod}");
    let nodes = kubectl.ok(&["get", "nodes"]);
    assert!(
        nodes.contains("sim-node-1") && nodes.contains("Ready") && nodes.contains("v1.33.1"),
        "{nodes}"
    );
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_label_annotate_and_patch() {
    let Some((sim, kubectl)) = setup().await else {
        return;
    };
    let cm =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  level: \"1\"\n";
    let path = kubectl.manifest("cm.yaml", cm);
    assert_eq!(
        kubectl.ok(&["apply", "-f", &path]),
        "configmap/settings created\n"
    );
    assert_eq!(
        kubectl.ok(&["apply", "-f", &path]),
        "configmap/settings unchanged\n"
    );
    assert_eq!(
        kubectl.ok(&["apply", "--server-side", "-f", &path]),
        "configmap/settings serverside-applied\n"
    );
    assert_eq!(
        kubectl.ok(&["label", "configmap", "settings", "tier=gold"]),
        "configmap/settings labeled\n"
    );
    assert_eq!(
        kubectl.ok(&["annotate", "configmap", "settings", "owner=ops"]),
        "configmap/settings annotated\n"
    );
    assert_eq!(
        kubectl.ok(&[
            "patch",
            "configmap",
            "settings",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"extra":"x"}}"#
        ]),
        "configmap/settings patched\n"
    );
    assert_eq!(
        kubectl.ok(&["patch", "configmap", "settings", "--type", "json", "-p", r#"[{"op":"test","path":"/data/extra","value":"x"},{"op":"replace","path":"/data/level","value":"2"}]"#]),
        "configmap/settings patched\n"
    );
    let (ok, _, err) = kubectl.run(&[
        "patch",
        "configmap",
        "settings",
        "--type",
        "json",
        "-p",
        r#"[{"op":"test","path":"/data/extra","value":"nope"}]"#,
    ]);
    assert!(
        !ok && err.contains("testing value /data/extra failed"),
        "{err}"
    );
    let object = sim
        .cluster
        .object("", "configmaps", "default", "settings")
        .expect("stored");
    assert_eq!(object["data"]["level"], "2");
    assert_eq!(object["data"]["extra"], "x");
    assert_eq!(object["metadata"]["labels"]["tier"], "gold");
    assert_eq!(object["metadata"]["annotations"]["owner"], "ops");
    let shown = kubectl.ok(&["get", "configmap", "settings", "--show-labels"]);
    assert!(shown.contains("tier=gold"), "{shown}");
    let yaml = kubectl.ok(&[
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.data.level}",
    ]);
    assert_eq!(yaml, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_with_each_cascade() {
    let Some((sim, kubectl)) = setup().await else {
        return;
    };
    for name in ["bg", "orphan", "fg"] {
        sim.cluster
            .create("default", shell_job(name, "sleep 30"))
            .expect("job");
    }
    let running = |name: &'static str| {
        let cluster = &sim.cluster;
        eventually(
            "a running pod",
            Duration::from_secs(10),
            move || async move {
                let job = cluster.object("batch", "jobs", "default", name)?;
                (job["status"]["active"] == 1).then_some(())
            },
        )
    };
    for name in ["bg", "orphan", "fg"] {
        running(name).await;
    }
    assert_eq!(
        kubectl.ok(&["delete", "job", "bg"]),
        "job.batch \"bg\" deleted\n"
    );
    assert_eq!(
        kubectl.ok(&["delete", "job", "orphan", "--cascade=orphan"]),
        "job.batch \"orphan\" deleted\n"
    );
    assert_eq!(
        kubectl.ok(&["delete", "job", "fg", "--cascade=foreground"]),
        "job.batch \"fg\" deleted\n"
    );
    let pods = kubectl.ok(&["get", "pods", "-l", "job-name=orphan", "-o", "name"]);
    assert!(
        pods.starts_with("pod/orphan-"),
        "orphaned pods stay: {pods}"
    );
    eventually(
        "the background and foreground pods to go",
        Duration::from_secs(10),
        || async {
            let left = kubectl.ok(&["get", "pods", "-o", "name"]);
            (!left.contains("pod/bg-") && !left.contains("pod/fg-")).then_some(())
        },
    )
    .await;
    let (ok, _, err) = kubectl.run(&["get", "job", "fg"]);
    assert!(
        !ok && err.contains("NotFound") && err.contains("jobs.batch \"fg\" not found"),
        "{err}"
    );
    let pod = pods.trim().trim_start_matches("pod/").to_string();
    assert_eq!(
        kubectl
            .ok(&["delete", "pod", &pod, "--grace-period=0", "--force"])
            .lines()
            .last(),
        Some(format!("pod \"{pod}\" force deleted").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_streams_changes() {
    let Some((sim, kubectl)) = setup().await else {
        return;
    };
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubectl.kubeconfig)
        .args(["get", "pods", "-w", "--request-timeout=20s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    eventually("the watch to open", Duration::from_secs(10), || async {
        (sim.cluster.request_count("watch", "pods") > 0).then_some(())
    })
    .await;
    sim.cluster
        .create("default", shell_job("watched", "echo hi"))
        .expect("job");
    let mut lines = Vec::new();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !lines.iter().any(|l: &String| l.contains("Completed")) {
        let left = end.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("watched-") && l.contains("Completed")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_and_auth_can_i() {
    let Some((sim, kubectl)) = setup_with(Some(SimConfig {
        rbac: true,
        ..SimConfig::for_tests()
    }))
    .await
    else {
        return;
    };
    let resources = kubectl.ok(&["api-resources"]);
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("jobs") && l.contains("batch/v1") && l.contains("Job")),
        "{resources}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("pods") && l.contains("po") && l.contains("Pod")),
        "{resources}"
    );
    assert_eq!(kubectl.ok(&["auth", "can-i", "create", "jobs"]), "yes\n");
    assert!(
        kubectl
            .ok(&["auth", "whoami"])
            .contains("kubeferry-sim-admin")
    );
    let token = sim.cluster.token_for("default", "runner");
    let limited = Kubectl {
        kubeconfig: kubectl.kubeconfig.with_file_name("runner.kubeconfig"),
    };
    sim.cluster
        .write_kubeconfig_as(&limited.kubeconfig, "runner", &token)
        .expect("written");
    let (ok, out, _) = limited.run(&["auth", "can-i", "create", "jobs"]);
    assert!(!ok && out == "no\n", "{out}");
    let (ok, _, err) = limited.run(&["get", "pods"]);
    assert!(!ok, "forbidden");
    assert!(err.contains("pods is forbidden: User \"system:serviceaccount:default:runner\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""), "{err}");
}

/// kubectl's `create <type>` commands send protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_create_commands() {
    let Some((sim, kubectl)) = setup().await else {
        return;
    };
    for (args, want) in [
        (
            vec!["create", "namespace", "team"],
            "namespace/team created\n",
        ),
        (
            vec!["create", "serviceaccount", "runner", "-n", "team"],
            "serviceaccount/runner created\n",
        ),
        (
            vec![
                "create",
                "secret",
                "generic",
                "creds",
                "--from-literal=token=s3cret",
                "-n",
                "team",
            ],
            "secret/creds created\n",
        ),
        (
            vec![
                "create",
                "configmap",
                "settings",
                "--from-literal=mode=fast",
                "-n",
                "team",
            ],
            "configmap/settings created\n",
        ),
        (
            vec![
                "create",
                "role",
                "reader",
                "--verb=get,list",
                "--resource=pods",
                "-n",
                "team",
            ],
            "role.rbac.authorization.k8s.io/reader created\n",
        ),
        (
            vec![
                "create",
                "rolebinding",
                "reader",
                "--role=reader",
                "--serviceaccount=team:runner",
                "-n",
                "team",
            ],
            "rolebinding.rbac.authorization.k8s.io/reader created\n",
        ),
        (
            vec![
                "create",
                "job",
                "pi",
                "--image=busybox",
                "-n",
                "team",
                "--",
                "sh",
                "-c",
                "echo 3.14",
            ],
            "job.batch/pi created\n",
        ),
    ] {
        assert_eq!(kubectl.ok(&args), want, "{args:?}");
    }
    let secret = sim
        .cluster
        .object("", "secrets", "team", "creds")
        .expect("secret");
    assert_eq!(secret["data"]["token"], "czNjcmV0");
    let binding = sim
        .cluster
        .object(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "team",
            "reader",
        )
        .expect("binding");
    assert_eq!(binding["subjects"][0]["name"], "runner");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(
        kubectl.ok(&[
            "wait",
            "--for=condition=complete",
            "job/pi",
            "-n",
            "team",
            "--timeout=10s"
        ]),
        "job.batch/pi condition met\n"
    );
    assert_eq!(kubectl.ok(&["logs", "job/pi", "-n", "team"]), "3.14\n");
    let token = kubectl.ok(&["create", "token", "runner", "-n", "team"]);
    assert_eq!(
        token.trim(),
        sim.cluster.token_for("team", "runner"),
        "kubectl create token hands out the account's token"
    );
    let job = sim
        .cluster
        .object("batch", "jobs", "team", "pi")
        .expect("job");
    assert_eq!(
        job["spec"]["template"]["spec"]["schedulerName"], "default-scheduler",
        "empty protobuf fields are unset"
    );
}
