//! What every API function's router ends with, and how it is served on Lambda.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, MAX_BODY_BYTES};

/// One span per request, under the runtime's per-invocation span (which carries the Lambda
/// request id): route, method, board, and the event id when a handler records it. Ends with
/// one access line (status, latency). Applied with `route_layer`, after routing.
pub async fn request_span(request: Request, next: Next) -> Response {
    use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
    let (mut parts, body) = request.into_parts();
    let route = parts.extensions.get::<MatchedPath>().map_or("", |p| p.as_str()).to_owned();
    let board = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok()
        .and_then(|params| params.iter().find(|(name, _)| *name == "board").map(|(_, value)| value.to_owned()));
    let request = Request::from_parts(parts, body);
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        route = %route,
        board = board.as_deref().unwrap_or(""),
        event_id = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let response = tracing::Instrument::instrument(next.run(request), span.clone()).await;
    let status = response.status().as_u16();
    span.in_scope(|| tracing::info!(status, millis = started.elapsed().as_millis() as u64, "request"));
    response
}

/// What every API function's router ends with: the request span, the JSON answers for unknown
/// routes and methods, the body limit, and the panic guard. `Router<S>` is the routes with
/// their layers, before the state is given.
pub fn finish<S: Clone + Send + Sync + 'static>(routes: axum::Router<S>) -> axum::Router<S> {
    routes
        .route_layer(axum::middleware::from_fn(request_span))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(catch_panic))
}

/// A panic in a handler answers the usual 500 body (the panic is logged, never sent) and the
/// function goes on serving: the release profile unwinds rather than aborts, so one bad
/// request cannot kill the container and make the next caller pay a cold start.
pub async fn catch_panic(request: Request, next: Next) -> Response {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let message = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
            tracing::error!(panic = message.as_deref().unwrap_or("(not a string)"), "handler panicked");
            ApiError::internal().into_response()
        }
    }
}

/// Answer for any path no route matches.
pub async fn unknown_route() -> ApiError {
    ApiError::not_found("no such route")
}

/// Answer for a known path with a method it does not take.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
}

/// Serves an API function's router on Lambda: concurrently when `AWS_LAMBDA_MAX_CONCURRENCY`
/// is above 1 (one instance, many requests, one shared Redis connection), one invocation at a
/// time otherwise. The response is converted to the runtime's body type before it leaves the
/// handler, because concurrent mode needs responses that are `Sync`.
pub async fn run_on_lambda(router: axum::Router) -> Result<(), lambda_http::Error> {
    use tower::ServiceExt;
    lambda_http::run_concurrent(lambda_http::service_fn(move |request: lambda_http::Request| {
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await?;
            Ok::<_, std::convert::Infallible>(lambda_http::IntoResponse::into_response(response).await)
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_router_serves_the_next_request() {
        async fn boom() -> &'static str {
            panic!("forced by the test")
        }
        let router = finish(axum::Router::new().route("/boom", get(boom)).route("/ok", get(|| async { "fine" })));
        let call = |path: &'static str| {
            let router = router.clone();
            async move {
                let response = router.oneshot(Request::builder().uri(path).body(Body::empty()).unwrap()).await.unwrap();
                let status = response.status();
                (status, response.into_body().collect().await.unwrap().to_bytes())
            }
        };
        let (status, body) = call("/boom").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal");
        assert!(!body.to_string().contains("forced"), "the panic message is logged, never sent");
        assert_eq!(call("/ok").await.0, StatusCode::OK);
        assert_eq!(call("/boom").await.0, StatusCode::INTERNAL_SERVER_ERROR, "and again: nothing was poisoned");
    }
}
