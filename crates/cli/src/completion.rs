//! Shell completion: `kubeferry completion SHELL` prints the shell code, which calls back into
//! kubeferry (`COMPLETE=SHELL kubeferry -- WORDS`, clap_complete's dynamic completion) so that
//! commands, flags, values and the execution ids `list` would show are completed.

use std::ffi::OsStr;
use std::time::Duration;

use clap::ValueEnum;
use clap_complete::CompletionCandidate;
use clap_complete::env::{Bash, EnvCompleter, Fish, Powershell, Zsh};

use crate::connect::{ClusterArgs, Fallback, connect};

/// The shells completion is offered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// Bash.
    Bash,
    /// Zsh.
    Zsh,
    /// Fish.
    Fish,
    /// PowerShell.
    Powershell,
}

/// The environment variable the shell code sets when it asks for completions.
pub const COMPLETE_VAR: &str = "COMPLETE";

/// How long completing ids may take: a shell waiting on an unreachable cluster is worse than
/// no ids.
const LIST_TIMEOUT: Duration = Duration::from_secs(3);

/// The shell code that registers completion for `bin`.
pub fn registration(shell: Shell, bin: &str) -> anyhow::Result<String> {
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Powershell => &Powershell,
    };
    let mut out = Vec::new();
    completer.write_registration(COMPLETE_VAR, bin, bin, bin, &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// The execution ids starting with `current`, from the jobs of every namespace of the current
/// context (of its namespace when kubeferry may not list cluster-wide); none when the cluster
/// cannot be reached in time.
pub fn complete_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(current) = current.to_str() else {
        return Vec::new();
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let ids = runtime
        .block_on(async { tokio::time::timeout(LIST_TIMEOUT, listed_ids()).await })
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    ids.into_iter()
        .filter(|(id, _)| id.starts_with(current))
        .map(|(id, state)| CompletionCandidate::new(id).help(Some(state.into())))
        .collect()
}

/// Every listed job's execution id and state.
async fn listed_ids() -> anyhow::Result<Vec<(String, String)>> {
    let args = ClusterArgs {
        kubeconfig: None,
        context: None,
        namespace: None,
        cluster_name: std::env::var("KUBEFERRY_CLUSTER_NAME").ok(),
        spark_operator: None,
    };
    let connection = connect(&args, Fallback::None).await?;
    let executor = &connection.executor;
    let jobs = match executor.list_all_namespaces(None).await {
        Ok(jobs) => jobs,
        Err(_) => {
            let namespace = executor.cluster().default_namespace().to_string();
            executor.list(&namespace, None).await?
        }
    };
    Ok(jobs
        .into_iter()
        .map(|job| (job.id.to_string(), job.status.state.to_string()))
        .collect())
}
