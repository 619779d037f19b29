//! The command-line examples of README.md and docs/**/*.md, run against one simulated cluster
//! and compared with the output the pages show.
//!
//! Every ```` ```console ```` block is run, file by file (README.md first, then docs/ in path
//! order), block by block, command by command. The syntax, as docs/cli.md states it:
//!
//! - `$ COMMAND` is run by `sh -c` (pipes, quotes and `$PWD` work); a line ending in `\`
//!   continues on the next one. Each command runs in its own shell.
//! - `? N` right after the command: the exit code it must end with (default 0).
//! - The lines up to the next `$ ` are its output, stdout and stderr together. They may come
//!   in any interleaving of the two streams, each stream's lines in their order.
//! - `[..]` in a line stands for any text within that line; a line `...` for any number of
//!   lines (none included).
//! - Trailing spaces, and the width of a run of spaces inside a line (a table's padding), do not
//!   count; any RFC 3339 time matches any other.
//!
//! The commands run in a scratch directory holding `examples/` (the repository's) and
//! `sim.kubeconfig`, the kubeconfig of `kubeferry sim serve --kubeconfig sim.kubeconfig
//! --crds spark-apache,spark-kubeflow,jobset`, started once for the whole run and named by
//! `KUBECONFIG`. `kubeferry` is the binary under test. `cargo run -- ARGS` runs it as a fresh
//! clone does: `kubeferry ARGS` with no kubeconfig at all (the embedded simulated cluster).
//! HOME is an empty directory, so no ~/.kube/config of the machine's is read.
//!
//! Use ```` ```sh ```` for commands that are not to be run (installing, starting servers).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one command may take.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);

/// How long the simulated cluster may take to write its kubeconfig.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// What the harness's cluster is started with (docs/getting-started.md shows the same command).
const SIM_SERVE: [&str; 6] = [
    "sim",
    "serve",
    "--kubeconfig",
    "sim.kubeconfig",
    "--crds",
    "spark-apache,spark-kubeflow,jobset",
];

/// Defines `cargo run -- ...` as a fresh clone's run of kubeferry with no kubeconfig.
const PRELUDE: &str = r#"cargo() {
  if [ "$1" = run ] && [ "$2" = -- ]; then
    shift 2
    env -u KUBECONFIG kubeferry "$@"
  else
    echo "docs examples run only \`cargo run -- ARGS\`; got: cargo $*" >&2
    return 127
  fi
}
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One `$` command of a console block, with what it must print and exit with.
#[derive(Debug)]
struct Example {
    file: String,
    line: usize,
    command: String,
    status: i32,
    expected: Vec<String>,
}

/// The console blocks' commands of one Markdown file, in order.
fn examples(file: &str, text: &str) -> Result<Vec<Example>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((_, line)) = lines.next() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let console = info.split_whitespace().next() == Some("console");
        // The block's lines, without the fence's indentation.
        let mut block = Vec::new();
        let mut closed = false;
        for (number, line) in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            let cut = line.len() - line.trim_start().len();
            block.push((number + 1, line[cut.min(indent)..].to_string()));
        }
        if !closed {
            return Err(format!("{file}: a code block is not closed"));
        }
        if !console {
            continue;
        }
        let mut rows = block.into_iter().peekable();
        while let Some((number, row)) = rows.next() {
            let Some(first) = row.strip_prefix("$ ") else {
                if row.trim().is_empty() {
                    continue;
                }
                return Err(format!(
                    "{file}:{number}: output before any `$ ` command in a console block"
                ));
            };
            let mut command = first.to_string();
            while command.ends_with('\\') {
                let Some((_, next)) = rows.next() else {
                    return Err(format!(
                        "{file}:{number}: the command's last line ends in `\\`"
                    ));
                };
                command.push('\n');
                command.push_str(&next);
            }
            let mut status = 0;
            if let Some((at, code)) = rows
                .peek()
                .and_then(|(at, row)| row.strip_prefix("? ").map(|code| (*at, code.to_string())))
            {
                status = code
                    .trim()
                    .parse()
                    .map_err(|_| format!("{file}:{at}: `? {code}` is not an exit code (`? 3`)"))?;
                rows.next();
            }
            let mut expected = Vec::new();
            while let Some((_, row)) = rows.peek() {
                if row.starts_with("$ ") {
                    break;
                }
                expected.push(rows.next().map(|(_, row)| row).unwrap_or_default());
            }
            while expected.last().is_some_and(|row| row.trim().is_empty()) {
                expected.pop();
            }
            out.push(Example {
                file: file.to_string(),
                line: number,
                command,
                status,
                expected,
            });
        }
    }
    Ok(out)
}

/// A line as compared: no trailing spaces, one space for a run of spaces after the indentation,
/// and `<time>` for each RFC 3339 time.
fn normalize(line: &str) -> String {
    let line = line.trim_end();
    let body = line.trim_start();
    let mut out = line[..line.len() - body.len()].to_string();
    let mut spaces = false;
    for c in body.chars() {
        if c == ' ' {
            spaces = true;
            continue;
        }
        if spaces {
            out.push(' ');
            spaces = false;
        }
        out.push(c);
    }
    replace_times(&out)
}

/// `text` with every RFC 3339 time (`2026-12-03T19:49:23Z`, `...T19:49:37.978239429Z`,
/// `...T19:49:23+02:00`) replaced by `<time>`.
fn replace_times(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if let Some(end) = time_at(bytes, i) {
            out.push_str("<time>");
            i = end;
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The end of an RFC 3339 time starting at `i`, if one does.
fn time_at(b: &[u8], i: usize) -> Option<usize> {
    let digits = |from: usize, n: usize| {
        (from + n <= b.len() && b[from..from + n].iter().all(u8::is_ascii_digit))
            .then_some(from + n)
    };
    let byte = |at: usize, want: u8| (b.get(at) == Some(&want)).then_some(at + 1);
    let mut at = digits(i, 4)?;
    for (separator, n) in [(b'-', 2), (b'-', 2), (b'T', 2), (b':', 2), (b':', 2)] {
        at = digits(byte(at, separator)?, n)?;
    }
    if let Some(fraction) = byte(at, b'.') {
        let mut end = fraction;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        if end > fraction {
            at = end;
        }
    }
    if let Some(end) = byte(at, b'Z') {
        return Some(end);
    }
    let sign = byte(at, b'+').or_else(|| byte(at, b'-'))?;
    digits(byte(digits(sign, 2)?, b':')?, 2)
}

/// Whether an expected line (with `[..]` wildcards) matches an actual one, both normalized.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("[..]").collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the expected lines are some interleaving of stdout's and stderr's lines, `...`
/// standing for any number of lines of either.
fn output_matches(expected: &[String], stdout: &[String], stderr: &[String]) -> bool {
    fn go(
        e: &[String],
        o: &[String],
        r: &[String],
        (i, j, k): (usize, usize, usize),
        seen: &mut HashMap<(usize, usize, usize), bool>,
    ) -> bool {
        if let Some(known) = seen.get(&(i, j, k)) {
            return *known;
        }
        let result = if i == e.len() {
            j == o.len() && k == r.len()
        } else if e[i] == "..." {
            go(e, o, r, (i + 1, j, k), seen)
                || (j < o.len() && go(e, o, r, (i, j + 1, k), seen))
                || (k < r.len() && go(e, o, r, (i, j, k + 1), seen))
        } else {
            (j < o.len() && line_matches(&e[i], &o[j]) && go(e, o, r, (i + 1, j + 1, k), seen))
                || (k < r.len()
                    && line_matches(&e[i], &r[k])
                    && go(e, o, r, (i + 1, j, k + 1), seen))
        };
        seen.insert((i, j, k), result);
        result
    }
    go(expected, stdout, stderr, (0, 0, 0), &mut HashMap::new())
}

/// The lines of a command's output as compared: trailing empty lines dropped.
fn output_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(normalize).collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// Reads a pipe to its end on a thread of its own.
fn drain(mut from: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    receiver
}

/// A command's exit code (None if killed), stdout and stderr.
struct Ran {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

/// The environment every command runs in.
struct Scratch {
    dir: tempfile::TempDir,
    path: String,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("a scratch directory");
        std::fs::create_dir(dir.path().join("home")).expect("an empty home");
        #[cfg(unix)]
        std::os::unix::fs::symlink(repo().join("examples"), dir.path().join("examples"))
            .expect("examples/ in the scratch directory");
        let binary = PathBuf::from(env!("CARGO_BIN_EXE_kubeferry"));
        let bin_dir = binary
            .parent()
            .expect("the binary's directory")
            .to_path_buf();
        let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .expect("a PATH")
        .to_string_lossy()
        .into_owned();
        Scratch { dir, path }
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", self.dir.path().join("home"))
            .env("KUBECONFIG", self.dir.path().join("sim.kubeconfig"))
            .env("TERM", "dumb")
            .env("NO_COLOR", "1")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs one example's command to its end, within the deadline.
    fn run(&self, shell_command: &str) -> Ran {
        let mut child = self
            .command("sh")
            .arg("-c")
            .arg(format!("{PRELUDE}{shell_command}"))
            .spawn()
            .expect("sh starts");
        let stdout = drain(child.stdout.take().expect("piped"));
        let stderr = drain(child.stderr.take().expect("piped"));
        let end = Instant::now() + COMMAND_DEADLINE;
        let status = loop {
            match child.try_wait().expect("the command's status") {
                Some(status) => break status.code(),
                None if Instant::now() >= end => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let take = |from: mpsc::Receiver<String>| {
            from.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| {
                    "<the output did not end: a process left running holds it>".into()
                })
        };
        Ran {
            status,
            stdout: take(stdout),
            stderr: take(stderr),
        }
    }
}

/// `kubeferry sim serve`, stopped (SIGTERM: its containers' processes stop with it) on drop.
struct Sim(Child);

impl Sim {
    fn start(scratch: &Scratch) -> Sim {
        let mut child = scratch
            .command(env!("CARGO_BIN_EXE_kubeferry"))
            .args(SIM_SERVE)
            .stdout(Stdio::null())
            .spawn()
            .expect("kubeferry sim serve starts");
        let stderr = child.stderr.take().expect("piped");
        let (sender, written) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("kubeconfig written") {
                    let _ = sender.send(());
                }
            }
        });
        let sim = Sim(child);
        written
            .recv_timeout(START_DEADLINE)
            .expect("kubeferry sim serve wrote its kubeconfig");
        sim
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// README.md, then every Markdown file under docs/ in path order.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = Vec::new();
    walk(&repo().join("docs"), &mut docs);
    docs.sort();
    std::iter::once(repo().join("README.md"))
        .chain(docs)
        .collect()
}

fn describe(example: &Example, ran: &Ran) -> String {
    let status = ran
        .status
        .map_or("killed after the deadline".to_string(), |code| {
            code.to_string()
        });
    format!(
        "{}:{}: $ {}\n--- expected (exit {}):\n{}\n--- got (exit {status}), stdout:\n{}--- stderr:\n{}",
        example.file,
        example.line,
        example.command,
        example.status,
        example.expected.join("\n"),
        ran.stdout,
        ran.stderr,
    )
}

#[test]
fn the_pages_console_examples_print_what_they_show() {
    let mut all = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        let name = page
            .strip_prefix(repo())
            .unwrap_or(&page)
            .display()
            .to_string();
        all.extend(examples(&name, &text).unwrap_or_else(|error| panic!("{error}")));
    }
    assert!(
        all.iter().any(|e| e.file == "README.md"),
        "README.md has console examples"
    );
    let scratch = Scratch::new();
    let _sim = Sim::start(&scratch);
    let mut failures = Vec::new();
    for example in &all {
        let ran = scratch.run(&example.command);
        let expected: Vec<String> = example.expected.iter().map(|l| normalize(l)).collect();
        let matched = ran.status == Some(example.status)
            && output_matches(
                &expected,
                &output_lines(&ran.stdout),
                &output_lines(&ran.stderr),
            );
        if !matched {
            failures.push(describe(example, &ran));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} examples differ from their pages:\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

#[cfg(test)]
mod matching {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(normalize).collect()
    }

    #[test]
    fn wildcards_stand_for_text_and_lines() {
        assert!(line_matches("a [..] c", "a b c"));
        assert!(line_matches("a[..]", "a"));
        assert!(!line_matches("a [..] c", "a b d"));
        assert!(!line_matches("ab[..]ba", "aba"));
        let expected = lines("one\n...\nfour");
        assert!(output_matches(
            &expected,
            &lines("one\ntwo\nthree\nfour"),
            &[]
        ));
        assert!(output_matches(&expected, &lines("one\nfour"), &[]));
        assert!(!output_matches(&expected, &lines("one\nfour\nfive"), &[]));
    }

    #[test]
    fn the_streams_may_interleave_but_keep_their_order() {
        let expected = lines("err 1\nout 1\nerr 2\nout 2");
        let (out, err) = (lines("out 1\nout 2"), lines("err 1\nerr 2"));
        assert!(output_matches(&expected, &out, &err));
        let swapped = lines("out 2\nerr 1\nout 1\nerr 2");
        assert!(!output_matches(&swapped, &out, &err));
    }

    #[test]
    fn padding_and_times_do_not_count() {
        assert_eq!(
            normalize("ID   STATE    2026-12-03T19:49:37.978239429Z  "),
            "ID STATE <time>"
        );
        assert_eq!(
            normalize("  \"at\": \"2026-01-02T03:04:05+02:00\""),
            "  \"at\": \"<time>\""
        );
        assert_eq!(normalize("2026-12-03"), "2026-12-03");
    }

    #[test]
    fn blocks_read_as_commands_statuses_and_output() {
        let page = "text\n\n```console\n$ kubeferry a \\\n  --b\n? 3\nout\n\n$ kubeferry c\n```\n\n```sh\n$ not run\n```\n";
        let found = examples("p.md", page).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].command, "kubeferry a \\\n  --b");
        assert_eq!((found[0].status, found[0].line), (3, 4));
        assert_eq!(found[0].expected, vec!["out".to_string()]);
        assert_eq!((found[1].status, found[1].expected.len()), (0, 0));
        assert!(examples("p.md", "```console\nno command\n```\n").is_err());
    }
}
