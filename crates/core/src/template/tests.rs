//! Tests of the template engine: examples, errors with positions, and properties.

use proptest::prelude::*;

use super::*;

fn params(pairs: &[(&str, &str)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn problems(result: Result<Rendered, TemplateError>) -> Vec<TemplateProblem> {
    match result {
        Err(TemplateError::Placeholders(problems)) => problems,
        other => panic!("expected placeholder problems, got {other:?}"),
    }
}

#[test]
fn fills_placeholders() {
    let p = params(&[("who", "world"), ("n", "3"), ("empty", "")]);
    let cases = [
        ("hello {{who}}", "hello world"),
        ("{{who}}{{who}}", "worldworld"),
        ("{{who:-nobody}}", "world"),
        ("{{other:-nobody}}", "nobody"),
        ("{{other:-}}", ""),
        ("{{other:-a:-b}}", "a:-b"),
        (
            "{{other:-with spaces and } brace}}",
            "with spaces and } brace",
        ),
        ("{{empty:-default}}", ""),
        ("x{{n}}y", "x3y"),
        ("\\{{who}}", "{{who}}"),
        ("\\{{", "{{"),
        ("a \\ b \\{ c", "a \\ b \\{ c"),
        ("\\\\{{who}}", "\\{{who}}"),
        ("}} alone", "}} alone"),
        ("{single}", "{single}"),
        ("ünï {{who}} cödé", "ünï world cödé"),
        ("{{dotted.name-1_x:-ok}}", "ok"),
        ("", ""),
    ];
    for (template, want) in cases {
        let rendered = render(template, &p).unwrap_or_else(|e| panic!("{template}: {e}"));
        assert_eq!(rendered.text(), want, "{template}");
    }
}

#[test]
fn lists_every_missing_parameter_with_its_position() {
    let template = "a: {{first}}\nb: {{second}}\nc: {{first}} {{ok:-1}}\n";
    let found = problems(render(template, &Params::new()));
    assert_eq!(
        found,
        vec![
            TemplateProblem::Missing {
                name: "first".into(),
                position: Position { line: 1, column: 4 },
                others: vec![Position { line: 3, column: 4 }],
            },
            TemplateProblem::Missing {
                name: "second".into(),
                position: Position { line: 2, column: 4 },
                others: vec![],
            },
        ]
    );
    let message = TemplateError::Placeholders(found).to_string();
    assert_eq!(
        message,
        "1:4: required parameter `first` is not set (also used at 3:4)\n\
         2:4: required parameter `second` is not set"
    );
}

#[test]
fn rejects_malformed_placeholders() {
    let cases = [
        (
            "x: {{ who }}",
            "1:4",
            "no spaces inside the braces, write {{who}}",
        ),
        ("{{}}", "1:1", "the name is empty"),
        ("{{:-d}}", "1:1", "the name is empty"),
        ("\n  {{1abc}}", "2:3", "starts with a letter or _"),
        ("{{a b}}", "1:1", "' ' is not allowed"),
        ("{{{x}}}", "1:1", "starts with a letter or _"),
        ("ok {{open\n}}", "1:4", "is not closed"),
        ("é {{open", "1:3", "is not closed"),
    ];
    for (template, at, message) in cases {
        let found = problems(render(template, &Params::new()));
        assert_eq!(found.len(), 1, "{template}: {found:?}");
        let text = found[0].to_string();
        assert!(text.starts_with(&format!("{at}: ")), "{template}: {text}");
        assert!(text.contains(message), "{template}: {text}");
    }
}

#[test]
fn reports_all_kinds_of_problems_together() {
    let found = problems(render("{{a}} {{b c}} {{d", &Params::new()));
    let kinds: Vec<&str> = found
        .iter()
        .map(|p| match p {
            TemplateProblem::Missing { .. } => "missing",
            TemplateProblem::InvalidName { .. } => "name",
            TemplateProblem::Unclosed { .. } => "unclosed",
        })
        .collect();
    assert_eq!(kinds, ["missing", "name", "unclosed"]);
    assert_eq!(
        format!("{}: {}", found[2].position(), found[2].message()),
        found[2].to_string()
    );
}

#[test]
fn maps_rendered_offsets_back_to_the_template() {
    let template = "name: job\nimage: {{image}}\nmemory: {{mem:-12XB}}\n\\{{x}}: y\n";
    let rendered = render(template, &params(&[("image", "busybox:1.36")])).expect("renders");
    let text = rendered.text();
    assert_eq!(
        text,
        "name: job\nimage: busybox:1.36\nmemory: 12XB\n{{x}}: y\n"
    );
    // A byte copied from the template maps to itself.
    let memory_key = text.find("memory").expect("present");
    assert_eq!(
        rendered.position(memory_key),
        Position { line: 3, column: 1 }
    );
    // A byte of a parameter's value maps to its placeholder and names the parameter.
    let value = text.find("12XB").expect("present");
    assert_eq!(
        rendered.position(value + 2),
        Position { line: 3, column: 9 }
    );
    assert_eq!(rendered.origin(value).parameter, Some("mem"));
    let image = text.find("1.36").expect("present");
    assert_eq!(rendered.position(image), Position { line: 2, column: 8 });
    // After an escape, positions still line up with the template.
    let y = text.rfind('y').expect("present");
    assert_eq!(rendered.position(y), Position { line: 4, column: 9 });
    // Past the end maps to the end of the template.
    assert_eq!(rendered.origin(text.len() + 10).offset, template.len());
    assert_eq!(rendered.used_parameters().len(), 2);
}

#[test]
fn reports_unused_parameters() {
    let p = params(&[("who", "a"), ("typo", "b")]);
    let rendered = render("{{who}}", &p).expect("renders");
    assert_eq!(rendered.unused_parameters(&p), ["typo"]);
}

#[test]
fn parses_assignments() {
    assert_eq!(
        parse_assignment("who=a=b").ok(),
        Some(("who".into(), "a=b".into()))
    );
    assert_eq!(
        parse_assignment("x=").ok(),
        Some(("x".into(), String::new()))
    );
    for bad in ["novalue", "=v", "a b=1", "1x=2"] {
        let error = parse_assignment(bad).expect_err(bad);
        assert!(error.to_string().contains(bad), "{error}");
    }
}

#[test]
fn positions_count_characters() {
    assert_eq!(
        Position::of_offset("ab\ncd", 4),
        Position { line: 2, column: 2 }
    );
    assert_eq!(
        Position::of_offset("éé x", 5),
        Position { line: 1, column: 4 }
    );
    // Inside a multi-byte character: the character's own position.
    assert_eq!(Position::of_offset("é", 1), Position { line: 1, column: 1 });
    assert_eq!(
        Position::of_offset("ab", 99),
        Position { line: 1, column: 3 }
    );
}

proptest! {
    #[test]
    fn text_without_placeholders_renders_unchanged(text in "[^{]*|([a-z \\\\}\n{][a-z \\\\}\n]?)*") {
        prop_assume!(!text.contains("{{"));
        let rendered = render(&text, &Params::new()).expect("no placeholders");
        prop_assert_eq!(rendered.text(), text.as_str());
        for offset in 0..text.len() {
            prop_assert_eq!(rendered.origin(offset).offset, offset);
        }
    }

    #[test]
    fn escaping_round_trips(text in "[a-z{}\\\\\n ]{0,40}") {
        let rendered = render(&escape(&text), &Params::new()).expect("escaped text renders");
        prop_assert_eq!(rendered.text(), text.as_str());
    }

    #[test]
    fn copied_bytes_map_to_equal_template_bytes(
        parts in prop::collection::vec(("[a-z :\n]{0,8}", prop::option::of("[a-z]{1,4}")), 0..6),
        value in "[a-z0-9\n]{0,6}",
    ) {
        // A template of literal text and placeholders, every parameter given `value`.
        let mut template = String::new();
        let mut want = String::new();
        let mut p = Params::new();
        for (literal, name) in &parts {
            template.push_str(literal);
            want.push_str(literal);
            if let Some(name) = name {
                template.push_str(&format!("{{{{{name}}}}}"));
                want.push_str(&value);
                p.insert(name.clone(), value.clone());
            }
        }
        let rendered = render(&template, &p).expect("every parameter is set");
        prop_assert_eq!(rendered.text(), want.as_str());
        for offset in 0..want.len() {
            let origin = rendered.origin(offset);
            match origin.parameter {
                None => prop_assert_eq!(
                    &template[origin.offset..origin.offset + 1],
                    &want[offset..offset + 1]
                ),
                Some(name) => {
                    let placeholder = format!("{{{{{name}}}}}");
                    prop_assert!(template[origin.offset..].starts_with(&placeholder));
                }
            }
        }
    }

    #[test]
    fn defaults_apply_exactly_when_unset(name in "[a-z][a-z0-9_]{0,6}", default in "[^}\n]{0,8}", value in "[^\n]{0,8}", set in any::<bool>()) {
        let template = format!("<{{{{{name}:-{default}}}}}>");
        let mut p = Params::new();
        if set {
            p.insert(name.clone(), value.clone());
        }
        let rendered = render(&template, &p).expect("a default fills it");
        let want = if set { value } else { default };
        prop_assert_eq!(rendered.text(), format!("<{want}>"));
    }
}
