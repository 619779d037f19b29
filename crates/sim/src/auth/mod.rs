//! Authentication: bearer tokens mapped to identities (one admin, and service accounts whose
//! tokens [`crate::SimCluster::token_for`] hands out). Authorization lives in [`rbac`].

pub mod rbac;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rand::Rng;

/// The user name of the admin identity.
pub const ADMIN_USER: &str = "kubeferry-sim-admin";

/// Who a request comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    /// User name, e.g. `system:serviceaccount:ns:sa`.
    pub user: String,
    /// Groups, e.g. `system:serviceaccounts`, `system:authenticated`.
    pub groups: Vec<String>,
}

impl Identity {
    /// The admin (member of `system:masters`, allowed everything).
    pub fn admin() -> Self {
        Identity {
            user: ADMIN_USER.to_string(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// Requests without a token when authentication is off act as the admin; without a token
    /// when it is on they are anonymous.
    pub fn anonymous() -> Self {
        Identity {
            user: "system:anonymous".to_string(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// A service account.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Identity {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// Whether this identity bypasses authorization.
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }

    /// (namespace, name) when this is a service account.
    pub fn service_account_parts(&self) -> Option<(&str, &str)> {
        let rest = self.user.strip_prefix("system:serviceaccount:")?;
        rest.split_once(':')
    }
}

/// A bearer token that names no identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown bearer token")]
pub struct UnknownToken;

/// Tokens and the identities they stand for.
pub struct Authenticator {
    required: bool,
    admin_token: String,
    tokens: RwLock<HashMap<String, Arc<Identity>>>,
}

fn random_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..40)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

impl Authenticator {
    /// An authenticator with an admin token; `required` false lets token-less requests act as
    /// the admin.
    pub fn new(admin_token: String, required: bool) -> Self {
        let mut tokens = HashMap::new();
        tokens.insert(admin_token.clone(), Arc::new(Identity::admin()));
        Authenticator {
            required,
            admin_token,
            tokens: RwLock::new(tokens),
        }
    }

    /// A new random token.
    pub fn generate_token() -> String {
        random_token()
    }

    /// The admin token.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Whether requests need a token.
    pub fn required(&self) -> bool {
        self.required
    }

    /// A token for a service account (the same one on every call).
    pub fn token_for(&self, namespace: &str, service_account: &str) -> String {
        let wanted = Identity::service_account(namespace, service_account);
        if let Some((token, _)) = self.tokens.read().iter().find(|(_, id)| ***id == wanted) {
            return token.clone();
        }
        let token = random_token();
        self.tokens.write().insert(token.clone(), Arc::new(wanted));
        token
    }

    /// The identity of an `Authorization` header value; `Err` for a bad token.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Arc<Identity>, UnknownToken> {
        let token = authorization.and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
                .map(str::trim)
        });
        match token {
            Some(t) => self.tokens.read().get(t).cloned().ok_or(UnknownToken),
            None if !self.required => Ok(Arc::new(Identity::admin())),
            None => Ok(Arc::new(Identity::anonymous())),
        }
    }
}
