//! The HTTP listener (`http.listeners`): `/metrics` in Prometheus' text format, `/healthz`
//! and `/readyz`, and `/` the live replication page. HTTP/1.1 by hyper on the broker's own
//! runtime; each connection in its own task, so that a slow scraper holds nothing else.
//! The broker's routes are read-only: GET (HEAD too), anything else is 405; the fault API
//! of `highwater dev --http` ([`serve_control`]) is served on its own listener. At most
//! [`CONNECTIONS_MAX`] connections are served at once; one more is answered 503 and
//! closed, so that idle or slow clients cannot take the broker's file descriptors.

mod health;
mod page;
mod scrape;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
pub use hyper::StatusCode;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::api::Broker;

/// How long one HTTP connection may take to send its request head.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// HTTP connections served at once, per listener.
pub const CONNECTIONS_MAX: usize = 64;
/// The answer to a connection past [`CONNECTIONS_MAX`].
const TOO_MANY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
content-length: 27\r\nconnection: close\r\n\r\ntoo many HTTP connections\r\n";

/// Binds every address of `http.listeners` (failing start-up when one cannot be bound,
/// as a Kafka listener does).
pub async fn bind(addresses: &[SocketAddr]) -> std::io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::with_capacity(addresses.len());
    for address in addresses {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("http.listeners {address}: {e}")))?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// Serves `listener` until the task is dropped.
pub async fn serve(broker: Arc<Broker>, listener: TcpListener) {
    match listener.local_addr() {
        Ok(address) => {
            tracing::info!(%address, "HTTP listener serving /metrics, /healthz, /readyz and /")
        }
        Err(error) => tracing::warn!(%error, "HTTP listener without a local address"),
    }
    accept_loop(listener, move |request| {
        let broker = Arc::clone(&broker);
        async move { route(&broker, &request) }
    })
    .await;
}

/// A control API served on its own listener (`highwater dev --http`: the testkit's
/// `/faults`): `post` tells POST from GET; the answer is a status and a JSON body.
pub trait Control: Send + Sync + 'static {
    /// Answers one request.
    fn handle(
        &self,
        post: bool,
        path: &str,
        query: &str,
    ) -> std::pin::Pin<Box<dyn Future<Output = (StatusCode, String)> + Send + '_>>;
}

/// Serves `control` on `listener` until the task is dropped.
pub async fn serve_control(control: Arc<dyn Control>, listener: TcpListener) {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "HTTP listener serving the fault API (/faults)");
    }
    accept_loop(listener, move |request| {
        let control = Arc::clone(&control);
        async move {
            let post = request.method() == Method::POST;
            if !post && request.method() != Method::GET {
                return text(StatusCode::METHOD_NOT_ALLOWED, "GET or POST\n".into());
            }
            let path = request.uri().path();
            let query = request.uri().query().unwrap_or_default();
            let (status, body) = control.handle(post, path, query).await;
            respond(status, "application/json", body)
        }
    })
    .await;
}

/// Accepts connections on `listener` and answers each request with `handler`.
async fn accept_loop<H, F>(listener: TcpListener, handler: H)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let (stream, client) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "HTTP accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::warn!(%client, limit = CONNECTIONS_MAX, "too many HTTP connections: refused");
            tokio::spawn(refuse(stream));
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let answer = handler(request);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%client, %error, "HTTP connection ended with an error");
            }
        });
    }
}

/// Answers 503 to a connection past the limit and closes it (bounded in time).
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let write = async {
        stream.write_all(TOO_MANY).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
}

fn route(broker: &Broker, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET is served\n".into(),
        );
    }
    match request.uri().path() {
        "/metrics" => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            scrape::render(broker),
        ),
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match health::not_ready(broker) {
            reasons if reasons.is_empty() => text(StatusCode::OK, "ready\n".into()),
            reasons => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready:\n{}\n", reasons.join("\n")),
            ),
        },
        "/" => respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            page::HTML.into(),
        ),
        "/state.json" => respond(StatusCode::OK, "application/json", page::state(broker)),
        path => text(StatusCode::NOT_FOUND, format!("no such page: {path}\n")),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    respond(status, "text/plain; charset=utf-8", body)
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    if let Ok(value) = "no-store".parse() {
        response
            .headers_mut()
            .insert(hyper::header::CACHE_CONTROL, value);
    }
    response
}
