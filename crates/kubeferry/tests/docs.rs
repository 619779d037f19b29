//! The repository's Markdown keeps its promises to readers: short sentences in README.md and the
//! guide under `docs/`, and relative links that lead somewhere in every Markdown file.
//!
//! Sentence lengths follow these rules:
//! - fenced code blocks, HTML comments and headings are skipped;
//! - each table cell, each list item and each paragraph is its own text; a sentence never spans
//!   two;
//! - the median counts the sentences of paragraphs and list items (prose), and must be under 20
//!   words; no sentence may exceed 50 words, table cells included;
//! - inline code counts as one word; a link counts as its text;
//! - a sentence ends at `.`, `!` or `?` followed by whitespace or the end of the text (`e.g.`,
//!   `i.e.`, `etc.` and `vs.` excepted);
//! - a word is a whitespace-separated token with at least one ASCII letter or digit;
//! - a page without prose is not measured.
//!
//! A relative link names a file or directory that exists, and its `#anchor` names a heading of
//! that Markdown file by GitHub's slug rules (or an HTML `id`/`name` in it).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

mod common;

use common::{files_under, name_of, repo_root};

/// The longest sentence allowed anywhere, in words.
const MAX_WORDS: usize = 50;
/// The median sentence length over prose must stay under this, in words.
const MEDIAN_UNDER: f64 = 20.0;

/// Every `.md` file under `dir`, skipping build output, virtual environments and hidden
/// directories.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let enter = |path: &Path| {
        let name = name_of(path);
        !(name.starts_with('.')
            || matches!(&*name, "target" | "node_modules" | "venv" | "__pycache__")
            || path.join("pyvenv.cfg").exists())
    };
    files_under(dir, &enter, &|path| name_of(path).ends_with(".md"), out);
}

/// README.md and every page of the guide.
fn guide_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut pages);
    pages
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Sentence lengths

/// Whether a text is prose (a paragraph or a list item) or a table cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Prose,
    Cell,
}

/// The text without its HTML comments (an unclosed `<!--` stays).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        match rest[start + 4..].find("-->") {
            Some(end) => {
                out.push_str(&rest[..start]);
                rest = &rest[start + 4 + end + 3..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// Lines split as Python's `str.splitlines` splits them.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let breaks = matches!(
            c,
            '\n' | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if breaks {
            lines.push(&text[start..i]);
            let mut next = i + c.len_utf8();
            if c == '\r'
                && let Some(&(j, '\n')) = chars.peek()
            {
                chars.next();
                next = j + 1;
            }
            start = next;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// A table's delimiter row: only pipes, colons, hyphens and whitespace.
fn is_delimiter_row(line: &str) -> bool {
    !line.is_empty()
        && line.chars().any(|c| c != '|')
        && line
            .chars()
            .all(|c| c == '|' || c == ':' || c == '-' || c.is_whitespace())
}

/// The rest of a list item's line after its marker (`- `, `* `, `+ `, `1. `, `1) `).
fn list_item(line: &str) -> Option<&str> {
    let after_marker = if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = line.len() - line.trim_start_matches(|c: char| c.is_numeric()).len();
        if digits == 0 {
            return None;
        }
        line[digits..].strip_prefix(['.', ')'])?
    };
    let text = after_marker.trim_start();
    (text.len() < after_marker.len()).then_some(text)
}

/// The texts whose sentences are measured: paragraphs and list items (prose) and table cells.
fn units(text: &str) -> Vec<(Unit, String)> {
    let text = strip_comments(text);
    let mut out = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let mut fence = false;
    let flush = |para: &mut Vec<&str>, out: &mut Vec<(Unit, String)>| {
        if !para.is_empty() {
            out.push((Unit::Prose, para.join(" ")));
            para.clear();
        }
    };
    for line in split_lines(&text) {
        let s = line.trim();
        if s.starts_with("```") || s.starts_with("~~~") {
            flush(&mut para, &mut out);
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        if s.is_empty() || s.starts_with('#') {
            flush(&mut para, &mut out);
            continue;
        }
        if s.starts_with('|') {
            flush(&mut para, &mut out);
            if is_delimiter_row(s) {
                continue;
            }
            let cells = s.trim_matches('|');
            out.extend(cells.split('|').map(|c| (Unit::Cell, c.to_string())));
            continue;
        }
        if let Some(item) = list_item(s) {
            flush(&mut para, &mut out);
            para.push(item);
            continue;
        }
        para.push(s);
    }
    flush(&mut para, &mut out);
    out
}

/// Inline code spans replaced by one word.
fn replace_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        match rest[open + 1..].find('`') {
            Some(close) => {
                out.push_str(&rest[..open]);
                out.push_str("CODE");
                rest = &rest[open + 1 + close + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// At `text[i..]`: a link or image `[label](destination)`, as (label, length matched).
fn link_at(text: &str, i: usize) -> Option<(&str, usize)> {
    let tail = &text[i..];
    let bracket = tail.strip_prefix('!').unwrap_or(tail);
    let label_start = bracket.strip_prefix('[')?;
    let label_end = label_start.find(']')?;
    let after = label_start[label_end + 1..].strip_prefix('(')?;
    let close = after.find(')')?;
    let consumed = (tail.len() - bracket.len()) + 1 + label_end + 2 + close + 1;
    Some((&label_start[..label_end], consumed))
}

/// Links and images replaced by their text.
fn replace_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match link_at(text, i) {
            Some((label, consumed)) => {
                out.push_str(label);
                i += consumed;
            }
            None => {
                let c = text[i..].chars().next().expect("inside the text");
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// `e.g.`, `i.e.`, `etc.` and `vs.` without their dots, so that they end no sentence.
fn replace_abbreviations(text: &str) -> String {
    const ABBREVIATIONS: [(&str, &str); 4] = [
        ("e.g.", "eg"),
        ("i.e.", "ie"),
        ("etc.", "etc"),
        ("vs.", "vs"),
    ];
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut previous: Option<char> = None;
    while i < text.len() {
        let at_boundary = !previous.is_some_and(|p| p.is_alphanumeric() || p == '_');
        let found = ABBREVIATIONS
            .iter()
            .find(|(abbreviation, _)| at_boundary && text[i..].starts_with(abbreviation));
        if let Some((abbreviation, replacement)) = found {
            out.push_str(replacement);
            i += abbreviation.len();
            previous = Some('.');
            continue;
        }
        let c = text[i..].chars().next().expect("inside the text");
        out.push(c);
        previous = Some(c);
        i += c.len_utf8();
    }
    out
}

/// A unit's sentences with their word counts; sentences without words are left out.
fn sentences(unit: &str) -> Vec<(usize, String)> {
    let text = replace_abbreviations(&replace_links(&replace_code(unit)));
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() && matches!(previous, Some('.' | '!' | '?')) {
            pieces.push(&text[start..i]);
            let mut end = text.len();
            while let Some(&(j, w)) = chars.peek() {
                if !w.is_whitespace() {
                    end = j;
                    break;
                }
                chars.next();
            }
            start = end;
            previous = None;
            continue;
        }
        previous = Some(c);
    }
    pieces.push(&text[start..]);
    pieces
        .into_iter()
        .filter_map(|s| {
            let words = s
                .split_whitespace()
                .filter(|w| w.chars().any(|c| c.is_ascii_alphanumeric()))
                .count();
            (words > 0).then(|| (words, s.to_string()))
        })
        .collect()
}

/// The median of the prose's sentence lengths (`None` without prose) and the sentences over
/// the limit.
fn measure(text: &str) -> (Option<f64>, Vec<(usize, String)>) {
    let mut lengths = Vec::new();
    let mut long = Vec::new();
    for (kind, unit) in units(text) {
        for (words, sentence) in sentences(&unit) {
            if kind == Unit::Prose {
                lengths.push(words);
            }
            if words > MAX_WORDS {
                long.push((words, sentence));
            }
        }
    }
    if lengths.is_empty() {
        return (None, long);
    }
    lengths.sort_unstable();
    let n = lengths.len();
    let median = if n % 2 == 1 {
        lengths[n / 2] as f64
    } else {
        (lengths[n / 2 - 1] + lengths[n / 2]) as f64 / 2.0
    };
    (Some(median), long)
}

/// What is wrong with a page's sentence lengths, one line per problem.
fn sentence_problems(name: &str, text: &str) -> Vec<String> {
    let (median, long) = measure(text);
    let Some(median) = median else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    if median >= MEDIAN_UNDER {
        problems.push(format!(
            "{name}: the median sentence has {median} words (must be under {MEDIAN_UNDER})"
        ));
    }
    for (words, sentence) in long {
        problems.push(format!(
            "{name}: a sentence of {words} words (at most {MAX_WORDS}): {sentence}"
        ));
    }
    problems
}

#[test]
fn sentences_in_the_readme_and_the_guide_are_short() {
    let root = repo_root();
    let mut problems = Vec::new();
    for page in guide_pages(&root) {
        let text = fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        problems.extend(sentence_problems(&relative(&root, &page), &text));
    }
    assert!(
        problems.is_empty(),
        "sentences too long:\n{}",
        problems.join("\n")
    );
}

#[test]
fn units_are_paragraphs_list_items_and_cells() {
    let text = "# A heading. Not counted.\n\
                One paragraph\non two lines.\n\n\
                - an item\n  continued\n- another item\n\
                <!-- a comment. -->\n\
                | head | er |\n|---|:-:|\n| a. b | c |\n\
                ```\ncode. code.\n```\n\
                1. numbered\n2) also\n-not an item\n";
    assert_eq!(
        units(text),
        vec![
            (Unit::Prose, "One paragraph on two lines.".to_string()),
            (Unit::Prose, "an item continued".to_string()),
            (Unit::Prose, "another item".to_string()),
            (Unit::Cell, " head ".to_string()),
            (Unit::Cell, " er ".to_string()),
            (Unit::Cell, " a. b ".to_string()),
            (Unit::Cell, " c ".to_string()),
            (Unit::Prose, "numbered".to_string()),
            (Unit::Prose, "also -not an item".to_string()),
        ]
    );
}

#[test]
fn code_links_and_abbreviations_do_not_split_or_lengthen_sentences() {
    let counted: Vec<usize> = sentences(
        "Run `cargo run -- run -f job.yaml. now` here, see [the long guide. Really](a.md) \
         or ![an image](x.png), e.g. this; i.e. that, etc. vs. those! Is it? Yes. - 42 ...",
    )
    .into_iter()
    .map(|(n, _)| n)
    .collect();
    assert_eq!(counted, vec![7, 11, 2, 1, 1]);
    assert_eq!(sentences("Ends here.\tNext one").len(), 2);
    assert_eq!(sentences("an unclosed `tick. and [text](x"), {
        vec![
            (3, "an unclosed `tick.".to_string()),
            (2, "and [text](x".to_string()),
        ]
    });
    // "e.g." ends no sentence only as a word of its own.
    assert_eq!(sentences("see.g. Next").len(), 2);
}

#[test]
fn the_median_counts_prose_and_the_limit_holds_everywhere() {
    let long_cell = format!("| {} |\n", "word ".repeat(51));
    let prose = "One two three. One two three four five.\n";
    let (median, long) = measure(&format!("{prose}\n{long_cell}"));
    assert_eq!(median, Some(4.0));
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].0, 51);

    let wordy = format!("{}.\n", "word ".repeat(20).trim_end());
    assert_eq!(
        sentence_problems("page.md", &wordy),
        vec!["page.md: the median sentence has 20 words (must be under 20)".to_string()]
    );
    assert!(sentence_problems("page.md", "Nineteen words or fewer pass.\n").is_empty());
    // A page without prose is not measured, however long its cells.
    assert!(sentence_problems("page.md", &long_cell).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Relative links

/// A link found in a Markdown file.
#[derive(Debug, PartialEq, Eq)]
struct Link {
    line: usize,
    destination: String,
}

/// The text of a line without its code spans (whose brackets are not links).
fn without_code(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let ticks = rest[open..].len() - rest[open..].trim_start_matches('`').len();
        let fence = &rest[open..open + ticks];
        match rest[open + ticks..].find(fence) {
            Some(close) => {
                out.push_str(&rest[..open]);
                out.push_str(" CODE ");
                rest = &rest[open + ticks + close + ticks..];
            }
            None => {
                out.push_str(&rest[..open + ticks]);
                rest = &rest[open + ticks..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A destination without its angle brackets and title.
fn clean_destination(raw: &str) -> String {
    let raw = raw.trim();
    if let Some(inner) = raw.strip_prefix('<') {
        return inner.split('>').next().unwrap_or_default().to_string();
    }
    raw.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Every inline link, image and reference definition outside code.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut fence: Option<String> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if marker.len() >= 3
            && (marker.chars().all(|c| c == '`') || marker.chars().all(|c| c == '~'))
        {
            match &fence {
                None => fence = Some(marker),
                Some(open) if marker.starts_with(open.as_str()) && trimmed.trim() == marker => {
                    fence = None
                }
                Some(_) => {}
            }
            continue;
        }
        if fence.is_some() {
            continue;
        }
        let line_text = without_code(line);
        // A reference definition: `[label]: destination`.
        let t = line_text.trim_start();
        if let Some(rest) = t.strip_prefix('[')
            && let Some(end) = rest.find("]:")
            && !rest[..end].contains('[')
        {
            found.push(Link {
                line: number + 1,
                destination: clean_destination(&rest[end + 2..]),
            });
            continue;
        }
        let mut i = 0;
        while let Some(pos) = line_text[i..].find("](") {
            let start = i + pos + 2;
            let mut depth = 0usize;
            let mut end = None;
            for (j, c) in line_text[start..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = Some(start + j);
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            found.push(Link {
                line: number + 1,
                destination: clean_destination(&line_text[start..end]),
            });
            i = end;
        }
    }
    found
}

/// Whether a destination leaves the repository (a URL with a scheme, or a protocol-relative one).
fn is_external(destination: &str) -> bool {
    if destination.starts_with("//") {
        return true;
    }
    match destination.find(':') {
        Some(colon) => {
            let scheme = &destination[..colon];
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// `%XX` escapes decoded.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ASCII hex digits");
            out.push(u8::from_str_radix(hex, 16).expect("two hex digits"));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A heading's text as GitHub renders it: code spans keep their text, links their label,
/// inline HTML goes.
fn heading_text(raw: &str) -> String {
    let mut text = String::new();
    let mut rest = raw;
    while let Some(open) = rest.find('`') {
        match rest[open + 1..].find('`') {
            Some(close) => {
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..open + 1 + close]);
                rest = &rest[open + 1 + close + 1..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    let text = replace_links(&text);
    let mut out = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lowercased; letters, digits, `_`, `-` and spaces
/// kept, spaces made hyphens, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a Markdown file offers: its headings' slugs (a repeated one numbered `-1`,
/// `-2`, ...) and its HTML `id`s and `name`s.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fence: Option<char> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let c = trimmed.chars().next().expect("a fence marker");
            fence = match fence {
                None => Some(c),
                Some(open) if open == c => None,
                other => other,
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        for attribute in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(pos) = rest.find(attribute) {
                let value = &rest[pos + attribute.len()..];
                if let Some(end) = value.find('"') {
                    found.insert(value[..end].to_string());
                }
                rest = &rest[pos + attribute.len()..];
            }
        }
        let level = trimmed.len() - trimmed.trim_start_matches('#').len();
        if !(1..=6).contains(&level) || line.len() - trimmed.len() > 3 {
            continue;
        }
        let after = &trimmed[level..];
        if !(after.is_empty() || after.starts_with([' ', '\t'])) {
            continue;
        }
        let mut title = after.trim();
        let closing = title.trim_end_matches('#');
        if closing.is_empty() || closing.ends_with([' ', '\t']) {
            title = closing.trim_end();
        }
        let base = slug(&heading_text(title));
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        found.insert(anchor);
    }
    found
}

/// Collapses `.` and `..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with a Markdown file's relative links, one line per broken link.
fn link_problems(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let name = relative(root, file);
    let mut problems = Vec::new();
    for link in links(text) {
        let destination = link.destination.as_str();
        if destination.is_empty() || is_external(destination) {
            continue;
        }
        let (path_part, anchor) = match destination.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (destination, None),
        };
        let path_part = path_part.split('?').next().unwrap_or_default();
        let at = format!("{name}:{}: ({destination})", link.line);
        if path_part.is_empty() {
            let anchor = percent_decode(anchor.unwrap_or_default());
            if !anchors(text).contains(&anchor) {
                problems.push(format!("{at}: no heading here has the anchor #{anchor}"));
            }
            continue;
        }
        let target = if let Some(from_root) = path_part.strip_prefix('/') {
            normalize(&root.join(percent_decode(from_root)))
        } else {
            let dir = file.parent().expect("a file has a directory");
            normalize(&dir.join(percent_decode(path_part)))
        };
        if !target.starts_with(root) {
            problems.push(format!("{at} leads out of the repository"));
            continue;
        }
        if !target.exists() {
            problems.push(format!("{at}: {} does not exist", relative(root, &target)));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        let is_markdown = target.extension().is_some_and(|e| e == "md");
        if !is_markdown {
            if target.is_dir() {
                problems.push(format!("{at}: a directory has no #{anchor}"));
            }
            // An anchor into source code (#L10) is GitHub's line link.
            continue;
        }
        let target_text =
            fs::read_to_string(&target).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        let anchor = percent_decode(anchor);
        if !anchors(&target_text).contains(&anchor) {
            problems.push(format!(
                "{at}: {} has no heading whose anchor is #{anchor}",
                relative(root, &target)
            ));
        }
    }
    problems
}

#[test]
fn relative_links_in_every_markdown_file_resolve() {
    let root = repo_root();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")),
        "the walk finds the repository's Markdown files"
    );
    let mut problems = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        problems.extend(link_problems(&root, file, &text));
    }
    assert!(
        problems.is_empty(),
        "broken relative links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn anchors_follow_github_slugs() {
    let text = "# The `Executor`: submit & wait\n\
                ## Step 1. Run it!\n\
                ## Step 1. Run it!\n\
                ### [Links](x.md) and ünïcode_names ###\n\
                ```\n# not a heading\n```\n\
                #not-a-heading\n\
                <a id=\"custom\"></a>\n";
    let found = anchors(text);
    let expected: BTreeSet<String> = [
        "the-executor-submit--wait",
        "step-1-run-it",
        "step-1-run-it-1",
        "links-and-ünïcode_names",
        "custom",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(found, expected);
}

#[test]
fn broken_links_and_anchors_are_named() {
    let root = repo_root();
    let file = root.join("docs/page.md");
    let text = "# Here\n\
                [ok](../README.md) [self](#here) [not here](#there) [site](https://example.com/x.md) \
                [gone](missing.md) [bad anchor](../README.md#no-such-heading) \
                `[in code](nowhere.md)` [dir](../crates/) [up](../../outside.md)\n\
                ```\n[fenced](nowhere.md)\n```\n\
                [ref]: ./also-missing.md \"title\"\n";
    let problems = link_problems(&root, &file, text);
    assert_eq!(
        problems,
        vec![
            "docs/page.md:2: (#there): no heading here has the anchor #there".to_string(),
            "docs/page.md:2: (missing.md): docs/missing.md does not exist".to_string(),
            "docs/page.md:2: (../README.md#no-such-heading): README.md has no heading whose anchor is #no-such-heading".to_string(),
            "docs/page.md:2: (../../outside.md) leads out of the repository".to_string(),
            "docs/page.md:6: (./also-missing.md): docs/also-missing.md does not exist".to_string(),
        ]
    );
}
