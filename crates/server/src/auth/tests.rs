use std::io::Write;
use std::path::PathBuf;

use super::*;

struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("kf-auth-{}-{name}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        Self(path)
    }

    fn write(&self, text: &str) {
        std::fs::write(&self.0, text).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

fn tokens_yaml() -> String {
    // Bob is given by the SHA-256 of his token.
    let bob: String = Sha256::digest(BOB.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "tokens:\n  - name: alice\n    token: {ALICE}\n    namespaces: [etl]\n  - name: bob\n    sha256: {bob}\n    namespaces: [\"*\"]\n"
    )
}

fn bearer(token: &str) -> Vec<u8> {
    format!("Bearer {token}").into_bytes()
}

#[test]
fn tokens_find_their_caller_and_scope() {
    let file = TempFile::new("scope", &tokens_yaml());
    let auth = Authenticator::from_file(&file.0).unwrap();

    let alice = auth.authenticate(Some(&bearer(ALICE))).unwrap();
    assert_eq!(alice.name, "alice");
    assert!(alice.scope.allows("etl"));
    assert!(!alice.scope.allows("default"));

    let bob = auth
        .authenticate(Some(b"bearer   bob-token-0123456789ab "))
        .unwrap();
    assert_eq!(bob.name, "bob");
    assert_eq!(bob.scope, Scope::All);

    assert_eq!(auth.authenticate(None), Err(Refusal::Missing));
    assert_eq!(auth.authenticate(Some(b"Basic abc")), Err(Refusal::Missing));
    assert_eq!(auth.authenticate(Some(b"Bearer ")), Err(Refusal::Missing));
    assert_eq!(
        auth.authenticate(Some(&bearer("alice-token-012345678"))),
        Err(Refusal::Invalid)
    );
}

#[test]
fn anonymous_lets_everyone_in_everywhere() {
    let auth = Authenticator::anonymous();
    let anyone = auth.authenticate(None).unwrap();
    assert_eq!(anyone.scope, Scope::All);
    assert!(auth.is_anonymous());
}

#[test]
fn a_changed_file_is_reloaded_and_a_broken_one_ignored() {
    let file = TempFile::new("reload", &tokens_yaml());
    let auth = Authenticator::from_file(&file.0).unwrap();
    assert!(!auth.reload(), "unchanged");

    let carol = "carol-token-0123456789";
    file.write(&format!(
        "tokens:\n  - name: carol\n    token: {carol}\n    namespaces: [default]\n"
    ));
    assert!(auth.reload());
    assert_eq!(
        auth.authenticate(Some(&bearer(ALICE))),
        Err(Refusal::Invalid)
    );
    assert_eq!(
        auth.authenticate(Some(&bearer(carol))).unwrap().name,
        "carol"
    );

    file.write("tokens: [this is not right");
    assert!(!auth.reload());
    assert_eq!(
        auth.authenticate(Some(&bearer(carol))).unwrap().name,
        "carol"
    );

    std::fs::remove_file(&file.0).unwrap();
    assert!(!auth.reload());
    assert_eq!(
        auth.authenticate(Some(&bearer(carol))).unwrap().name,
        "carol"
    );
}

#[test]
fn mistakes_are_named_without_showing_tokens() {
    let secret = "s3cr3t-value-never-shown";
    let cases = [
        (
            "tokens:\n  - name: a\n    token: short\n    namespaces: [x]\n".to_string(),
            "tokens[0] (\"a\").token: shorter than 16".to_string(),
        ),
        (
            format!("tokens:\n  - name: a\n    token: {secret}\n    namespaces: []\n"),
            "tokens[0] (\"a\").namespaces: empty".into(),
        ),
        (
            "tokens:\n  - name: a\n    namespaces: [x]\n".to_string(),
            "give exactly one of token and sha256".into(),
        ),
        (
            "tokens:\n  - name: a\n    sha256: abc\n    namespaces: [x]\n".to_string(),
            "sha256: not 64 hexadecimal digits".into(),
        ),
        (
            format!(
                "tokens:\n  - name: a\n    token: {secret}\n    namespaces: [x]\n  - name: b\n    token: {secret}\n    namespaces: [x]\n"
            ),
            "the same token is given twice".into(),
        ),
        (
            format!(
                "tokens:\n  - name: a\n    token: {secret}\n    namespaces: [x]\n  - name: a\n    token: other-0123456789abcdef\n    namespaces: [x]\n"
            ),
            "the name is used twice".into(),
        ),
        (
            format!(
                "tokens:\n  - name: a\n    token: {secret}\n    namespaces: [x]\n    extra: {secret}\n"
            ),
            "not a tokens file".into(),
        ),
        (
            format!("tokens:\n  - name: a\n    token: [{secret}]\n    namespaces: [x]\n"),
            "not a tokens file".into(),
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let file = TempFile::new(&format!("bad{i}"), text);
        let message = Authenticator::from_file(&file.0).unwrap_err().to_string();
        assert!(message.contains(expected.as_str()), "{text}\n{message}");
        assert!(!message.contains(secret), "a token leaked: {message}");
    }
}

#[test]
fn parse_errors_lose_their_quoted_values() {
    assert_eq!(
        redacted_parse_error("invalid type: string \"hunter2\", expected a sequence at line 3"),
        "invalid type: string \"…\", expected a sequence at line 3"
    );
    assert_eq!(
        redacted_parse_error("unknown field `x`"),
        "unknown field `…`"
    );
}
