//! `kubeferry template render`: a job file with its parameters filled in.

use std::process::ExitCode;

use crate::args::SpecArgs;
use crate::spec_input;

/// Runs `kubeferry template render`.
pub fn render(args: &SpecArgs) -> anyhow::Result<ExitCode> {
    print!("{}", spec_input::render(args)?);
    Ok(ExitCode::SUCCESS)
}
