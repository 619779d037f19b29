//! The spanned document tree that job files are read into: YAML (and JSON, which YAML 1.2
//! contains) parsed with saphyr-parser, every node and key keeping its byte offset.
//!
//! The tree keeps each scalar's source spelling (so `cpu: 0.50` and `args: [yes]` mean what
//! was written, never a re-printed float or a YAML 1.1 boolean) and rejects duplicate keys,
//! which a YAML mapping may not have but most loaders silently overwrite.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

/// The deepest nesting accepted (job files are shallow; this bounds recursion).
const MAX_DEPTH: usize = 64;
/// The most nodes a document may expand to, aliases included (bounds "billion laughs").
const MAX_NODES: usize = 100_000;

/// A node of the document and the byte offset where it starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) offset: usize,
    pub(crate) value: Value,
}

/// What a node holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

/// A scalar as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Scalar {
    pub(crate) text: String,
    /// Plain (unquoted, untagged as a string), so `~`, `null` and nothing at all mean null.
    pub(crate) plain: bool,
}

impl Scalar {
    pub(crate) fn is_null(&self) -> bool {
        self.plain && matches!(self.text.as_str(), "" | "~" | "null" | "Null" | "NULL")
    }
}

/// One key and value of a mapping.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_offset: usize,
    pub(crate) value: Node,
}

impl Node {
    /// What kind of value this is, for messages: "a string", "a list", "a mapping".
    pub(crate) fn describe(&self) -> String {
        match &self.value {
            Value::Scalar(s) if s.is_null() => "nothing (null)".into(),
            Value::Scalar(s) => format!("{:?}", s.text),
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
        }
    }
}

/// A document that could not be parsed, at a byte offset of the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) offset: usize,
    pub(crate) message: String,
    /// An earlier place the message refers to (the first of two duplicate keys).
    pub(crate) earlier: Option<usize>,
}

/// Parses the single document in `text`; `None` when the text holds no document.
/// With `json`, the text is first checked as strict JSON, so that what YAML would forgive
/// (comments, trailing commas, single quotes) is reported at its place.
pub(crate) fn parse(text: &str, json: bool) -> Result<Option<Node>, SyntaxError> {
    if json {
        check_json(text)?;
    }
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        chars: CharOffsets::new(text),
        anchors: HashMap::new(),
        nodes: 0,
    };
    builder.stream()
}

fn check_json(text: &str) -> Result<(), SyntaxError> {
    let Err(error) = serde_json::from_str::<serde::de::IgnoredAny>(text) else {
        return Ok(());
    };
    // serde_json counts lines from 1 and columns in bytes from 1, pointing at the byte it
    // stopped on; its message ends with the position, which is reported separately.
    let line_start: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(str::len)
        .sum();
    let mut offset = (line_start + error.column().saturating_sub(1)).min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    // serde_json words a trailing comma as "key must be a string" or "expected value".
    if matches!(text.as_bytes().get(offset), Some(b'}' | b']')) {
        let before = text[..offset].trim_end();
        if before.ends_with(',') {
            return Err(SyntaxError {
                offset: before.len() - 1,
                message: "invalid JSON: trailing comma (JSON allows none)".into(),
                earlier: None,
            });
        }
    }
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    Err(SyntaxError {
        offset,
        message: format!("invalid JSON: {message}"),
        earlier: None,
    })
}

/// Byte offsets of character indices (saphyr-parser counts characters).
struct CharOffsets {
    /// `None` for ASCII text, where the two are the same.
    offsets: Option<Vec<usize>>,
    len: usize,
}

impl CharOffsets {
    fn new(text: &str) -> Self {
        let offsets = (!text.is_ascii()).then(|| text.char_indices().map(|(i, _)| i).collect());
        Self {
            offsets,
            len: text.len(),
        }
    }

    fn byte(&self, char_index: usize) -> usize {
        match &self.offsets {
            None => char_index.min(self.len),
            Some(offsets) => offsets.get(char_index).copied().unwrap_or(self.len),
        }
    }
}

struct Builder<'input> {
    parser: Parser<'input, saphyr_parser::StrInput<'input>>,
    chars: CharOffsets,
    anchors: HashMap<usize, Node>,
    nodes: usize,
}

impl<'input> Builder<'input> {
    fn next(&mut self) -> Result<(Event<'input>, Span), SyntaxError> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(error)) => Err(SyntaxError {
                offset: self.chars.byte(error.marker().index()),
                message: format!("invalid YAML: {}", error.info()),
                earlier: None,
            }),
            None => Err(SyntaxError {
                offset: self.chars.len,
                message: "unexpected end of input".into(),
                earlier: None,
            }),
        }
    }

    fn offset(&self, span: &Span) -> usize {
        self.chars.byte(span.start.index())
    }

    fn error(&self, span: &Span, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            offset: self.offset(span),
            message: message.into(),
            earlier: None,
        }
    }

    fn stream(&mut self) -> Result<Option<Node>, SyntaxError> {
        let mut document = None;
        loop {
            let (event, span) = self.next()?;
            match event {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => return Ok(document),
                Event::DocumentStart(_) => {
                    if document.is_some() {
                        return Err(self.error(
                            &span,
                            "a job file holds one document, but a second one starts here",
                        ));
                    }
                    let (event, span) = self.next()?;
                    document = Some(self.node(event, span, 0)?);
                }
                _ => return Err(self.error(&span, "unexpected content outside a document")),
            }
        }
    }

    fn node(
        &mut self,
        event: Event<'input>,
        span: Span,
        depth: usize,
    ) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error(&span, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error(&span, format!("more than {MAX_NODES} values")));
        }
        let offset = self.offset(&span);
        let (value, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let as_string = self.check_tag(tag.as_deref(), &span)?;
                let plain = style == ScalarStyle::Plain && !as_string;
                let value = Value::Scalar(Scalar {
                    text: text.into_owned(),
                    plain,
                });
                (value, anchor)
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_tag(tag.as_deref(), &span)?;
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, span, depth + 1)?);
                }
                (Value::Seq(items), anchor)
            }
            Event::MappingStart(anchor, tag) => {
                self.check_tag(tag.as_deref(), &span)?;
                let mut entries: Vec<Entry> = Vec::new();
                loop {
                    let (event, key_span) = self.next()?;
                    if matches!(event, Event::MappingEnd) {
                        break;
                    }
                    let key = self.node(event, key_span, depth + 1)?;
                    let Value::Scalar(Scalar { text: key_text, .. }) = key.value else {
                        return Err(self.error(&key_span, "mapping keys must be strings"));
                    };
                    if let Some(first) = entries.iter().find(|e| e.key == key_text) {
                        let first = first.key_offset;
                        return Err(SyntaxError {
                            offset: key.offset,
                            message: format!("duplicate key `{key_text}`"),
                            earlier: Some(first),
                        });
                    }
                    let (event, span) = self.next()?;
                    let value = self.node(event, span, depth + 1)?;
                    entries.push(Entry {
                        key: key_text,
                        key_offset: key.offset,
                        value,
                    });
                }
                (Value::Map(entries), anchor)
            }
            Event::Alias(id) => {
                let Some(node) = self.anchors.get(&id) else {
                    return Err(self.error(&span, "alias to an unknown anchor"));
                };
                let node = node.clone();
                self.nodes += count(&node);
                if self.nodes > MAX_NODES {
                    return Err(self.error(&span, format!("more than {MAX_NODES} values")));
                }
                return Ok(node);
            }
            _ => return Err(self.error(&span, "unexpected YAML event")),
        };
        let node = Node { offset, value };
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    /// Accepts the YAML core schema's tags (`!!str` forces a string); refuses others, which
    /// would mean types this format does not have. Returns whether the tag is `!!str`.
    fn check_tag(&self, tag: Option<&Tag>, span: &Span) -> Result<bool, SyntaxError> {
        match tag {
            None => Ok(false),
            Some(tag) if tag.is_yaml_core_schema() => Ok(tag.suffix == "str"),
            Some(tag) => Err(self.error(span, format!("the tag `{tag}` is not supported"))),
        }
    }
}

fn count(node: &Node) -> usize {
    1 + match &node.value {
        Value::Scalar(_) => 0,
        Value::Seq(items) => items.iter().map(count).sum(),
        Value::Map(entries) => entries.iter().map(|e| 1 + count(&e.value)).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(node: &Node) -> &str {
        match &node.value {
            Value::Scalar(s) => &s.text,
            other => panic!("not a scalar: {other:?}"),
        }
    }

    fn entries(node: &Node) -> &[Entry] {
        match &node.value {
            Value::Map(entries) => entries,
            other => panic!("not a mapping: {other:?}"),
        }
    }

    #[test]
    fn keeps_offsets_and_spelling() {
        let text = "name: hello\ncpu: 0.50\nargs: [yes, 'a b', \"c\"]\nempty:\n";
        let root = parse(text, false).expect("parses").expect("a document");
        let e = entries(&root);
        assert_eq!(e[0].key, "name");
        assert_eq!(e[1].key_offset, text.find("cpu").expect("cpu"));
        assert_eq!(scalar(&e[1].value), "0.50");
        assert_eq!(e[1].value.offset, text.find("0.50").expect("0.50"));
        let Value::Seq(items) = &e[2].value.value else {
            panic!("args is a list")
        };
        assert_eq!(scalar(&items[0]), "yes");
        assert_eq!(items[1].offset, text.find("'a b'").expect("quoted"));
        assert_eq!(items[2].offset, text.find("\"c\"").expect("quoted"));
        let Value::Scalar(empty) = &e[3].value.value else {
            panic!("empty is a scalar")
        };
        assert!(empty.is_null());
    }

    #[test]
    fn offsets_are_bytes_after_multibyte_text() {
        let text = "note: ünïcödé\nimage: x\n";
        let root = parse(text, false).expect("parses").expect("a document");
        let image = &entries(&root)[1];
        assert_eq!(image.key_offset, text.find("image").expect("image"));
        assert_eq!(image.value.offset, text.rfind('x').expect("x"));
    }

    #[test]
    fn quoting_and_str_tags_make_strings() {
        let text = "a: null\nb: 'null'\nc: !!str null\nd: ~\n";
        let root = parse(text, false).expect("parses").expect("a document");
        let nulls: Vec<bool> = entries(&root)
            .iter()
            .map(|e| matches!(&e.value.value, Value::Scalar(s) if s.is_null()))
            .collect();
        assert_eq!(nulls, [true, false, false, true]);
    }

    #[test]
    fn aliases_expand() {
        let text = "base: &b {x: 1}\ncopy: *b\n";
        let root = parse(text, false).expect("parses").expect("a document");
        let e = entries(&root);
        assert_eq!(entries(&e[1].value)[0].key, "x");
    }

    #[test]
    fn json_parses_with_tabs_and_positions() {
        let text = "{\n\t\"name\": \"hello\",\n\t\"args\": [\"a\", 1]\n}\n";
        let root = parse(text, true).expect("parses").expect("a document");
        let e = entries(&root);
        assert_eq!(e[1].key_offset, text.find("\"args\"").expect("args"));
        assert_eq!(scalar(&e[0].value), "hello");
    }

    #[test]
    fn syntax_errors_point_at_their_place() {
        let cases: [(&str, bool, &str, &str); 9] = [
            ("a: [1, 2\n", false, "", ""),
            ("a: b\n  c: d\n", false, ": d", "not allowed"),
            ("x: 1\nx: 2\n", false, "x: 2", "duplicate key `x`"),
            ("a: 1\n---\nb: 2\n", false, "---", "one document"),
            ("a: !custom 1\n", false, "!custom", "not supported"),
            (
                "{\"a\": [1,]}\n",
                true,
                ",]",
                "invalid JSON: trailing comma",
            ),
            (
                "{\n  \"a\": 1\n  \"b\": 2\n}",
                true,
                "\"b\"",
                "invalid JSON: expected `,` or `}`",
            ),
            (
                "{\"a\": 1} // c",
                true,
                "/",
                "invalid JSON: trailing characters",
            ),
            ("{\"ä\": é}", true, "é", "invalid JSON: expected value"),
        ];
        for (text, json, at, message) in cases {
            let error = parse(text, json).expect_err(text);
            if !at.is_empty() {
                assert_eq!(
                    error.offset,
                    text.find(at).expect("marker"),
                    "{text:?}: {error:?}"
                );
            }
            assert!(error.message.contains(message), "{text:?}: {error:?}");
        }
    }

    #[test]
    fn bounds_nesting_and_expansion() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            parse(&deep, false)
                .expect_err("too deep")
                .message
                .contains("nested")
        );
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (i, prev) in ["b", "c", "d", "e", "f", "g"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f"])
        {
            laughs.push_str(&format!("{i}: &{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert!(
            parse(&laughs, false)
                .expect_err("too big")
                .message
                .contains("more than")
        );
        assert_eq!(parse("", false), Ok(None));
        assert_eq!(parse("# only a comment\n", false), Ok(None));
    }
}
