//! The page and its assets as the `query` router serves them. The browser tests
//! (tests/browser, run by scripts/test.sh) drive the same page in headless Chromium.

use axum::http::Method;
use standings_tests::{TestApp, spawn_ingest};

/// The `assets/…` files the page references, in order.
fn referenced_assets(html: &str) -> Vec<&str> {
    html.split(['"', '\'']).filter(|part| part.starts_with("assets/")).collect()
}

async fn page(app: &TestApp) -> String {
    let (status, headers, html) = app.fetch_query(Method::GET, "/").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["content-security-policy"], query::web::CONTENT_SECURITY_POLICY);
    html
}

#[tokio::test]
async fn the_page_allows_only_its_own_origin_and_loads_no_inline_code() {
    let app = spawn_ingest().await;
    let html = page(&app).await;
    assert!(query::web::CONTENT_SECURITY_POLICY.starts_with("default-src 'self';"));
    assert!(!query::web::CONTENT_SECURITY_POLICY.contains("unsafe"));
    assert!(html.contains(r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#), "readable on a phone");
    // The policy would block inline code: everything comes from assets/.
    assert_eq!(html.matches("<script").count(), html.matches(r#"<script src="assets/"#).count());
    for inline in ["<style", " style=", " onclick=", " onload=", "javascript:", "http://", "https://"] {
        assert!(!html.contains(inline), "the page holds {inline:?}");
    }
}

#[tokio::test]
async fn every_asset_the_page_references_is_served_with_its_type() {
    let app = spawn_ingest().await;
    let html = page(&app).await;
    let assets = referenced_assets(&html);
    assert_eq!(assets, ["assets/favicon.svg", "assets/app.css", "assets/panels.js", "assets/app.js"]);
    let script = "text/javascript; charset=utf-8";
    for (asset, content_type) in assets.iter().zip(["image/svg+xml", "text/css; charset=utf-8", script, script]) {
        let (status, headers, body) = app.fetch_query(Method::GET, &format!("/{asset}")).await;
        assert_eq!(status, 200, "{asset}");
        assert_eq!(headers["content-type"], content_type, "{asset}");
        assert_eq!(headers["cache-control"], "public, max-age=300");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(!body.is_empty());
    }
}

/// Nicknames are user data: the script builds the DOM with text nodes only.
#[tokio::test]
async fn the_script_never_parses_data_as_html() {
    let app = spawn_ingest().await;
    for file in ["app.js", "panels.js"] {
        let (_, _, script) = app.fetch_query(Method::GET, &format!("/assets/{file}")).await;
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('style'"] {
            assert!(!script.contains(sink), "{file} uses {sink}");
        }
        assert!(script.contains("textContent"), "{file}");
    }
}

#[tokio::test]
async fn unknown_assets_and_other_methods_get_json_errors() {
    let app = spawn_ingest().await;
    let (status, body) = app.get("/assets/app.jsx").await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (404, Some("not_found")));
    let (status, body) = app.get("/assets/../v1/boards").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = app.call_query(Method::POST, "/", "").await;
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (405, Some("method_not_allowed")));
}
