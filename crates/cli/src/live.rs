//! The live status line of `run` and `wait` on a terminal: the state, reason and message, the
//! time since kubeferry started watching, and the pod and its node, redrawn in place with the
//! job's log lines printed above it. Off a terminal (a pipe, CI), with `--no-progress` or
//! `TERM=dumb`, each change is a plain line on stderr instead, as always.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kubeferry::kube::Executor;
use kubeferry::{ExecutionId, ExecutionInfo};

use crate::output::one_line;

/// How often the spinner and the elapsed time are redrawn (the status itself changes only
/// when the watch reports a change).
const REDRAW: Duration = Duration::from_millis(120);

/// Where status changes go: the live line, or plain lines.
#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A live line when stderr is a terminal and `--no-progress` was not given; plain lines
    /// otherwise.
    pub fn new(no_progress: bool) -> Self {
        let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
        if no_progress || dumb || !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        // https://no-color.org: any non-empty value turns colours off.
        let colour = std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
        let template = if colour {
            "{spinner:.cyan} {prefix:.bold} {elapsed:.dim} {wide_msg}"
        } else {
            "{spinner} {prefix} {elapsed} {wide_msg}"
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bar =
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style);
        bar.set_prefix("SUBMITTED");
        bar.enable_steady_tick(REDRAW);
        Self { bar: Some(bar) }
    }

    fn live(&self) -> Option<&ProgressBar> {
        self.bar.as_ref().filter(|bar| !bar.is_finished())
    }

    /// Shows a new status of `id`: on the live line (with the pod and node the watch cache
    /// knows), else as a plain line.
    pub fn status(&self, executor: &Executor, id: &ExecutionId, info: &ExecutionInfo) {
        let Some(bar) = self.live() else {
            crate::output::progress(id, info);
            return;
        };
        bar.set_prefix(info.state.to_string());
        let placement = executor.placement(id).map(|p| (p.pod, p.node));
        bar.set_message(live_message(info, placement));
    }

    /// Writes a log line on stdout (or stderr), above the live line.
    pub fn log(&self, line: &str, to_stderr: bool) {
        let write = || {
            if to_stderr {
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            } else {
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(line.as_bytes());
                let _ = stdout.flush();
            }
        };
        match self.live() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Removes the live line for good: what follows prints as plain lines.
    pub fn clear(&self) {
        if let Some(bar) = self.live() {
            bar.finish_and_clear();
        }
    }
}

/// The live line's text after the state: `Reason: message · pod P on N`.
fn live_message(info: &ExecutionInfo, placement: Option<(String, Option<String>)>) -> String {
    let mut text = info.reason.to_string();
    let message = one_line(&info.message);
    if !message.is_empty() {
        text.push_str(": ");
        text.push_str(&message);
    }
    if let Some((pod, node)) = placement {
        text.push_str(" · pod ");
        text.push_str(&pod);
        if let Some(node) = node {
            text.push_str(" on ");
            text.push_str(&node);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeferry::{JobState, Reason};

    #[test]
    fn the_line_says_why_and_where() {
        let info = ExecutionInfo::new(JobState::Queued, Reason::Unschedulable)
            .with_message("0/3 nodes have enough\n nvidia.com/gpu");
        assert_eq!(
            live_message(&info, None),
            "Unschedulable: 0/3 nodes have enough nvidia.com/gpu"
        );
        let info = ExecutionInfo::new(JobState::Started, Reason::Running);
        assert_eq!(
            live_message(&info, Some(("p-1".into(), Some("node-a".into())))),
            "Running · pod p-1 on node-a"
        );
        assert_eq!(
            live_message(&info, Some(("p-1".into(), None))),
            "Running · pod p-1"
        );
    }
}
