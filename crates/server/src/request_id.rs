//! Request ids: the caller's `x-request-id` when it sent a usable one, else a fresh one; kept
//! for the request's task so that error bodies and log lines carry it.

use axum::http::HeaderMap;
use rand::Rng;

/// The header carrying request ids, both ways.
pub const HEADER: &str = "x-request-id";

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being handled, if any.
pub fn current() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Runs `future` as part of request `id`.
pub async fn scope<F: Future>(id: String, future: F) -> F::Output {
    REQUEST_ID.scope(id, future).await
}

/// The caller's id if it is short printable ASCII (it goes into logs and headers), else a
/// fresh one.
pub fn from_headers(headers: &HeaderMap) -> String {
    headers
        .get(HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|id| {
            !id.is_empty()
                && id.len() <= 128
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b))
        })
        .map(str::to_string)
        .unwrap_or_else(generate)
}

/// A fresh id: 16 random hex digits.
pub fn generate() -> String {
    format!("{:016x}", rand::rng().random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_ids_are_kept_and_others_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER, "abc-123_x.y:z/1".parse().unwrap());
        assert_eq!(from_headers(&headers), "abc-123_x.y:z/1");
        for bad in ["has space", "semi;colon", &"x".repeat(129)] {
            headers.insert(HEADER, bad.parse().unwrap());
            let id = from_headers(&headers);
            assert_eq!(id.len(), 16, "{bad}: {id}");
            assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        assert_ne!(generate(), generate());
    }

    #[tokio::test]
    async fn the_id_is_visible_inside_its_scope_only() {
        assert_eq!(current(), None);
        let seen = scope("r1".into(), async { current() }).await;
        assert_eq!(seen.as_deref(), Some("r1"));
    }
}
