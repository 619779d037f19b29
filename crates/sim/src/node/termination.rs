//! Termination messages, as the kubelet reports them in `state.terminated.message`.
//!
//! A container's `terminationMessagePath` cannot be a path on this host (the process is not in
//! a container), so each container gets a file in its pod's scratch directory,
//! `.termination/<container name>`, emptied before every start, and the process finds its path
//! in the environment variable [`PATH_ENV`]. A program that runs both here and on a real
//! cluster writes to `${TERMINATION_MESSAGE_PATH:-/dev/termination-log}`.
//!
//! After the process ends the kubelet reads the last 4096 bytes of the file. With
//! `terminationMessagePolicy: FallbackToLogsOnError`, a container that failed and wrote
//! nothing there gets the end of its log instead: its last 80 lines, of which at most the last
//! 2048 bytes. Each message is then cut to 12 KiB divided by the pod's number of containers
//! (init containers included), as the kubelet's status manager does.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The environment variable that holds the path of the container's termination message file.
pub const PATH_ENV: &str = "TERMINATION_MESSAGE_PATH";
/// The most the kubelet reads from the file (its end).
pub const MAX_FILE_BYTES: u64 = 4096;
/// The most log lines a fallback message takes.
pub const FALLBACK_LINES: usize = 80;
/// The most bytes a fallback message takes (the end of those lines).
pub const FALLBACK_BYTES: usize = 2048;
/// The most all the messages of one pod may hold, shared evenly by its containers.
pub const MAX_POD_BYTES: usize = 12 * 1024;

/// The file of a container in its pod's scratch directory.
pub fn file_of(pod_dir: &Path, container: &str) -> PathBuf {
    pod_dir.join(".termination").join(container)
}

/// Creates the file empty (before each start of the container).
pub fn prepare(file: &Path) -> io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::File::create(file).map(drop)
}

/// What reading the file found.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// No file.
    Missing,
    /// Its last bytes.
    Text(Vec<u8>),
    /// It could not be read: the message says why.
    Unreadable(String),
}

/// Reads the last [`MAX_FILE_BYTES`] of the file.
pub fn read(file: &Path) -> Written {
    let tail = || -> io::Result<Vec<u8>> {
        let mut f = std::fs::File::open(file)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(MAX_FILE_BYTES)))?;
        let mut bytes = Vec::new();
        f.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    match tail() {
        Ok(bytes) => Written::Text(bytes),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Written::Missing,
        Err(error) => Written::Unreadable(format!(
            "Error on reading termination log {}: {error}",
            file.display()
        )),
    }
}

/// The message of a terminated container: the runtime's own message (if any), then what the
/// container left (`": "` between them), cut to the pod's share. `fallback_to_logs` is the
/// policy `FallbackToLogsOnError` on a run that failed; `log_tail` gives the end of its log.
pub fn message(
    runtime: Option<String>,
    written: Written,
    fallback_to_logs: bool,
    log_tail: impl FnOnce() -> Vec<u8>,
    containers_in_pod: usize,
) -> Option<String> {
    let left = match written {
        Written::Text(bytes) if !bytes.is_empty() => bytes,
        Written::Unreadable(why) => why.into_bytes(),
        Written::Text(_) | Written::Missing if fallback_to_logs => log_tail(),
        Written::Text(_) | Written::Missing => Vec::new(),
    };
    let mut message = runtime.map(String::into_bytes).unwrap_or_default();
    if !left.is_empty() {
        if !message.is_empty() {
            message.extend_from_slice(b": ");
        }
        message.extend_from_slice(&left);
    }
    message.truncate(MAX_POD_BYTES / containers_in_pod.max(1));
    (!message.is_empty()).then(|| String::from_utf8_lossy(&message).into_owned())
}

/// The end of a log for a fallback message: the last [`FALLBACK_LINES`] lines, of which at
/// most the last [`FALLBACK_BYTES`] bytes.
pub fn log_tail<'a>(lines: impl DoubleEndedIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut last: Vec<&[u8]> = lines.rev().take(FALLBACK_LINES).collect();
    last.reverse();
    let joined = last.concat();
    joined[joined.len().saturating_sub(FALLBACK_BYTES)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Vec<u8> {
        Vec::new()
    }

    #[test]
    fn messages_follow_the_kubelets_rules() {
        let text = |s: &str| Written::Text(s.as_bytes().to_vec());
        let logs = || b"last words\n".to_vec();
        struct Case {
            runtime: Option<&'static str>,
            written: Written,
            fallback: bool,
            want: Option<&'static str>,
        }
        let case = |runtime, written, fallback, want| Case {
            runtime,
            written,
            fallback,
            want,
        };
        let table = vec![
            case(None, text("done\n"), false, Some("done\n")),
            case(None, text("done\n"), true, Some("done\n")),
            case(None, text(""), false, None),
            case(None, text(""), true, Some("last words\n")),
            case(None, Written::Missing, true, Some("last words\n")),
            case(
                Some("runtime said"),
                text("app said"),
                false,
                Some("runtime said: app said"),
            ),
            case(Some("runtime said"), text(""), false, Some("runtime said")),
            case(
                None,
                Written::Unreadable("Error on reading termination log x: denied".into()),
                true,
                Some("Error on reading termination log x: denied"),
            ),
        ];
        for Case {
            runtime,
            written,
            fallback,
            want,
        } in table
        {
            assert_eq!(
                message(runtime.map(str::to_string), written, fallback, logs, 1).as_deref(),
                want
            );
        }
    }

    #[test]
    fn a_pods_share_is_cut_evenly() {
        let long = Written::Text(vec![b'x'; 4096]);
        assert_eq!(
            message(None, long, false, none, 3).map(|m| m.len()),
            Some(4096)
        );
        let long = Written::Text(vec![b'x'; 4096]);
        assert_eq!(
            message(None, long, false, none, 4).map(|m| m.len()),
            Some(3072)
        );
        // A cut through a character leaves a replacement character, as Go's encoder does
        // (12288 / 11 = 1117 bytes: 558 two-byte characters and half of one).
        let accents = Written::Text("é".repeat(2048).into_bytes());
        let cut = message(None, accents, false, none, 11).unwrap_or_default();
        assert_eq!(cut, format!("{}\u{fffd}", "é".repeat(558)));
    }

    #[test]
    fn the_log_tail_is_80_lines_and_2048_bytes_at_most() {
        let lines: Vec<Vec<u8>> = (0..100)
            .map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let tail = log_tail(lines.iter().map(Vec::as_slice));
        let text = String::from_utf8(tail).unwrap_or_default();
        assert!(
            text.starts_with("line 20\n") && text.ends_with("line 99\n"),
            "{text}"
        );
        let wide: Vec<Vec<u8>> = (0..10)
            .map(|i| format!("{i}{}\n", "y".repeat(499)).into_bytes())
            .collect();
        let tail = log_tail(wide.iter().map(Vec::as_slice));
        assert_eq!(tail.len(), 2048);
        assert!(tail.ends_with(b"yyy\n"));
    }

    #[test]
    fn the_file_is_read_from_its_end() {
        let dir = std::env::temp_dir().join(format!("kubeferry-sim-term-{}", std::process::id()));
        let file = file_of(&dir, "main");
        assert_eq!(read(&file), Written::Missing);
        prepare(&file).expect("prepared");
        assert_eq!(read(&file), Written::Text(Vec::new()));
        let mut content = vec![b'a'; 100];
        content.extend(vec![b'b'; 4096]);
        std::fs::write(&file, &content).expect("written");
        assert_eq!(read(&file), Written::Text(vec![b'b'; 4096]));
        prepare(&file).expect("emptied again");
        assert_eq!(read(&file), Written::Text(Vec::new()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
