//! The real `kubectl` against the simulated cluster (skipped, with a printed reason, only when
//! kubectl is not installed).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Sim, eventually, shell_job, start};
use kubeferry_sim::SimCluster;

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
    if !kubectl_present() {
        return None;
    }
    let sim = start().await;
    let kubectl = Kubectl {
        kubeconfig: kubeconfig(&sim.cluster),
    };
    Some((sim, kubectl))
}

#[tokio::test(flavor = "multi_thread")]
async fn get_jobs_and_pods_and_logs() {
    let Some((sim, kubectl)) = setup().await else {
        return;
    };
    sim.cluster
        .create("default", shell_job("hello", "echo hello from the job"))
        .expect("job created");
    let pod = eventually("the job's pod to finish", Duration::from_secs(10), || {
        let cluster = &sim.cluster;
        async move {
            let job = cluster.object("batch", "jobs", "default", "hello")?;
            let done = job["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Complete" && c["status"] == "True");
            done.then_some(())
        }
    })
    .await;
    let () = pod;
    let out = tokio::task::spawn_blocking(move || {
        let listing = kubectl.ok(&["get", "jobs,pods", "-A"]);
        let pod_line = listing
            .lines()
            .find(|l| l.contains("pod/hello-"))
            .map(str::to_string)
            .unwrap_or_default();
        let pod_name = pod_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .trim_start_matches("pod/")
            .to_string();
        let logs = kubectl.ok(&["logs", &pod_name]);
        let job_logs = kubectl.ok(&["logs", "job/hello"]);
        (listing, pod_line, logs, job_logs)
    })
    .await
    .expect("kubectl ran");
    let (listing, pod_line, logs, job_logs) = out;
    assert!(listing.contains("job.batch/hello"), "{listing}");
    assert!(
        listing.contains("Complete") && listing.contains("1/1"),
        "{listing}"
    );
    assert!(
        pod_line.contains("Completed") && pod_line.starts_with("default"),
        "{listing}"
    );
    assert_eq!(logs, "hello from the job\n");
    assert_eq!(job_logs, "hello from the job\n");
}
