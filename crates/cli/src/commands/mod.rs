//! One module per subcommand.

pub mod cancel;
pub mod list;
pub mod logs;
pub mod rbac;
pub mod run;
pub mod sim;
pub mod status;
pub mod submit;
pub mod sweep;
pub mod template;
pub mod wait;

use std::process::ExitCode;

use kubeferry::{ExecutionInfo, JobState};

/// The exit code for a job's final status: 0 when it succeeded, its own exit code when it
/// failed with one (1-255), 1 otherwise.
pub fn exit_code_of(info: &ExecutionInfo) -> ExitCode {
    match (info.state, info.exit_code) {
        (JobState::Succeeded, _) => ExitCode::SUCCESS,
        (JobState::Failed, Some(code)) if (1..=255).contains(&code) => {
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        _ => ExitCode::FAILURE,
    }
}

/// Parses an execution id given on the command line. The id names its namespace; `-n`, when
/// given too, must name the same one (a namespace given two ways is refused, as `submit` refuses
/// a job file's namespace that `-n` contradicts).
pub fn parse_id(text: &str, namespace: Option<&str>) -> anyhow::Result<kubeferry::ExecutionId> {
    let id: kubeferry::ExecutionId = text.parse()?;
    if let Some(namespace) = namespace
        && namespace != id.namespace
    {
        return Err(crate::UsageError(format!(
            "execution id {id} is in namespace {:?}, but -n says {namespace:?}; remove one",
            id.namespace
        ))
        .into());
    }
    Ok(id)
}
