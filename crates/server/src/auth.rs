//! Bearer-token authentication: tokens read from a file (and re-read when it changes), compared
//! in constant time, each limited to a set of namespaces. Tokens never reach logs or responses.
//!
//! The tokens file is YAML:
//!
//! ```yaml
//! tokens:
//!   - name: gravitino            # names the caller in logs; never the token
//!     token: "a long random string"
//!     namespaces: [etl, default] # or ["*"]: every namespace the service serves
//!   - name: airflow
//!     sha256: "9f86d08188..."    # the token's SHA-256 in hex, instead of the token itself
//!     namespaces: ["*"]
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tracing::{info, warn};

/// Which namespaces a caller may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace the service serves.
    All,
    /// Only these.
    Namespaces(BTreeSet<String>),
}

impl Scope {
    /// Whether the caller may use `namespace`.
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Namespaces(namespaces) => namespaces.contains(namespace),
        }
    }
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The token's name (`anonymous` without authentication).
    pub name: String,
    /// Whether a token named it (false for a service that asks for none).
    pub authenticated: bool,
    /// The namespaces it may use.
    pub scope: Scope,
}

/// Why a tokens file cannot be used; never shows a token.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file could not be read.
    #[error("cannot read the tokens file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is malformed.
    #[error("tokens file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the entry's index or name, never its token).
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokenEntry {
    name: String,
    token: Option<String>,
    sha256: Option<String>,
    namespaces: Vec<String>,
}

/// The shortest token accepted: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

struct Token {
    digest: [u8; 32],
    principal: Principal,
}

/// The tokens in force.
struct TokenSet {
    tokens: Vec<Token>,
    /// A digest of the file's text, to notice changes.
    source_digest: [u8; 32],
}

impl TokenSet {
    fn parse(path: &Path, text: &str) -> Result<TokenSet, TokensError> {
        let invalid = |message: String| TokensError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        // The parser's own message could quote a token; say only where the problem is.
        let file: TokensFile = serde_saphyr::from_str(text).map_err(|error| {
            invalid(format!(
                "not a tokens file ({}); expected `tokens:` with entries of name, token or sha256, and namespaces",
                redacted_parse_error(&error.without_snippet().to_string())
            ))
        })?;
        let mut names = BTreeSet::new();
        let mut digests = BTreeSet::new();
        let mut tokens = Vec::new();
        for (i, entry) in file.tokens.into_iter().enumerate() {
            let at = format!("tokens[{i}] ({:?})", entry.name);
            if entry.name.trim().is_empty() {
                return Err(invalid(format!("tokens[{i}].name: must not be empty")));
            }
            if !names.insert(entry.name.clone()) {
                return Err(invalid(format!("{at}: the name is used twice")));
            }
            let digest = match (entry.token, entry.sha256) {
                (Some(token), None) => {
                    if token.len() < MIN_TOKEN_LEN {
                        return Err(invalid(format!(
                            "{at}.token: shorter than {MIN_TOKEN_LEN} characters"
                        )));
                    }
                    digest(token.as_bytes())
                }
                (None, Some(hex)) => parse_hex_digest(&hex)
                    .ok_or_else(|| invalid(format!("{at}.sha256: not 64 hexadecimal digits")))?,
                _ => {
                    return Err(invalid(format!(
                        "{at}: give exactly one of token and sha256"
                    )));
                }
            };
            if !digests.insert(digest) {
                return Err(invalid(format!(
                    "{at}: the same token is given twice; every caller needs its own"
                )));
            }
            if entry.namespaces.is_empty() {
                return Err(invalid(format!(
                    "{at}.namespaces: empty; list namespaces, or [\"*\"] for all"
                )));
            }
            let scope = if entry.namespaces.iter().any(|n| n == "*") {
                Scope::All
            } else {
                Scope::Namespaces(entry.namespaces.into_iter().collect())
            };
            tokens.push(Token {
                digest,
                principal: Principal {
                    name: entry.name,
                    authenticated: true,
                    scope,
                },
            });
        }
        Ok(TokenSet {
            tokens,
            source_digest: digest(text.as_bytes()),
        })
    }

    /// The principal of a token, comparing against every entry in constant time.
    fn find(&self, presented: &[u8]) -> Option<&Principal> {
        let presented = digest(presented);
        let mut found = 0u32;
        let mut index = 0u32;
        for (i, token) in self.tokens.iter().enumerate() {
            let matched = token.digest.ct_eq(&presented);
            index.conditional_assign(&(i as u32), matched);
            found.conditional_assign(&1, matched);
        }
        (found == 1).then(|| &self.tokens[index as usize].principal)
    }
}

/// Keeps the text of a parse error but none of the values it may quote.
fn redacted_parse_error(message: &str) -> String {
    // Messages quote offending values in backticks or quotes; keep the rest (line and column).
    let mut out = String::new();
    let mut quoted = None;
    for c in message.chars() {
        match quoted {
            Some(end) if c == end => {
                out.push('…');
                out.push(c);
                quoted = None;
            }
            Some(_) => {}
            None if c == '`' || c == '"' || c == '\'' => {
                out.push(c);
                quoted = Some(c);
            }
            None => out.push(c),
        }
    }
    out
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn parse_hex_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token that is not (or no longer) valid.
    Invalid,
}

/// Authenticates requests.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

enum Inner {
    Anonymous,
    Tokens {
        path: PathBuf,
        set: RwLock<Arc<TokenSet>>,
    },
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.inner {
            Inner::Anonymous => f.write_str("Authenticator(anonymous)"),
            Inner::Tokens { path, .. } => write!(f, "Authenticator({})", path.display()),
        }
    }
}

impl Authenticator {
    /// Every caller is let in, with every namespace.
    pub fn anonymous() -> Self {
        Self {
            inner: Arc::new(Inner::Anonymous),
        }
    }

    /// Tokens from `path`.
    pub fn from_file(path: &Path) -> Result<Self, TokensError> {
        let set = read_tokens(path)?;
        info!(message = "bearer tokens loaded", file = %path.display(), tokens = set.tokens.len());
        Ok(Self {
            inner: Arc::new(Inner::Tokens {
                path: path.to_path_buf(),
                set: RwLock::new(Arc::new(set)),
            }),
        })
    }

    /// The caller presenting `authorization` (the header's value, if any).
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, Refusal> {
        let set = match &*self.inner {
            Inner::Anonymous => {
                return Ok(Principal {
                    name: "anonymous".into(),
                    authenticated: false,
                    scope: Scope::All,
                });
            }
            Inner::Tokens { set, .. } => set.read().unwrap_or_else(|p| p.into_inner()).clone(),
        };
        let header = authorization.ok_or(Refusal::Missing)?;
        let token = bearer_token(header).ok_or(Refusal::Missing)?;
        set.find(token).cloned().ok_or(Refusal::Invalid)
    }

    /// Re-reads the tokens file if it changed. A file that became unreadable or malformed
    /// leaves the tokens in force unchanged (and is reported); returns whether tokens changed.
    pub fn reload(&self) -> bool {
        let Inner::Tokens { path, set } = &*self.inner else {
            return false;
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                warn!(message = "cannot re-read the tokens file; keeping the tokens in force", file = %path.display(), %error);
                return false;
            }
        };
        let current = set.read().unwrap_or_else(|p| p.into_inner()).clone();
        if current.source_digest == digest(text.as_bytes()) {
            return false;
        }
        match TokenSet::parse(path, &text) {
            Ok(new) => {
                info!(message = "bearer tokens reloaded", file = %path.display(), tokens = new.tokens.len());
                *set.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new);
                true
            }
            Err(error) => {
                warn!(message = "the tokens file changed but cannot be used; keeping the tokens in force", %error);
                false
            }
        }
    }

    /// Whether tokens are checked at all.
    pub fn is_anonymous(&self) -> bool {
        matches!(&*self.inner, Inner::Anonymous)
    }
}

fn read_tokens(path: &Path) -> Result<TokenSet, TokensError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    TokenSet::parse(path, &text)
}

/// The token of an `Authorization: Bearer <token>` header value.
fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token.as_bytes())
}

#[cfg(test)]
mod tests;
