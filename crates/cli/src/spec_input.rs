//! Reading a job file (or standard input) and filling its template parameters.

use std::io::Read;

use anyhow::Context;
use kubeferry::core::spec::{self, JobSpec};
use kubeferry::core::template::{self, Params};

use crate::args::SpecArgs;

/// The job file's text and the name its errors are reported under.
pub struct SpecText {
    /// `hello.yaml`, or `<stdin>`.
    pub source_name: String,
    /// The text as written.
    pub text: String,
    /// The parameters from `--set`.
    pub params: Params,
}

/// Reads the file named by `-f` (`-` is standard input).
pub fn read(args: &SpecArgs) -> anyhow::Result<SpecText> {
    let (source_name, text) = if args.file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the job file from standard input")?;
        ("<stdin>".to_string(), text)
    } else {
        let text = std::fs::read_to_string(&args.file)
            .with_context(|| format!("cannot read job file {}", args.file.display()))?;
        (args.file.display().to_string(), text)
    };
    let mut params = Params::new();
    for (name, value) in &args.params {
        params.insert(name.clone(), value.clone());
    }
    Ok(SpecText {
        source_name,
        text,
        params,
    })
}

/// Reads, renders and validates the job file. Nothing is created before this succeeds.
pub fn load(args: &SpecArgs) -> anyhow::Result<JobSpec> {
    let input = read(args)?;
    warn_unused(&input);
    Ok(spec::load(&input.source_name, &input.text, &input.params)?)
}

/// Renders the template only (for `kubeferry template render`).
pub fn render(args: &SpecArgs) -> anyhow::Result<String> {
    let input = read(args)?;
    warn_unused(&input);
    let rendered = template::render(&input.text, &input.params)
        .map_err(|error| spec::SpecError::from_template(&input.source_name, error))?;
    Ok(rendered.text().to_string())
}

/// A `--set` the file never uses is most likely a typo: say so, without failing.
fn warn_unused(input: &SpecText) {
    if let Ok(rendered) = template::render(&input.text, &input.params) {
        for name in rendered.unused_parameters(&input.params) {
            eprintln!(
                "kubeferry: warning: --set {name}=...: {} has no {{{{{name}}}}} placeholder",
                input.source_name
            );
        }
    }
}
