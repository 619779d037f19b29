//! The OpenAPI document, generated from the handlers, is pinned by a snapshot: a change to the
//! API shows up as a change to this snapshot in review.

#[test]
fn the_openapi_document_is_stable() {
    let document = kubeferry_server::api::openapi();
    let json = serde_json::to_value(&document).unwrap();
    insta::assert_json_snapshot!("openapi", json);
}
