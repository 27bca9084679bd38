//! memoria-runtime: runs each namespace's WebAssembly component for the `/ns/{namespace}/...`
//! routes. The HTTP server only sees [`ComponentRouter`]; the wasmtime host implements it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use memoria_tenant::Namespace;

/// Error type of streamed response bodies.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A response body the server can stream to the client.
pub type HttpBody = UnsyncBoxBody<Bytes, BodyError>;

/// A boxed future of a response.
pub type ResponseFuture = Pin<Box<dyn Future<Output = hyper::Response<HttpBody>> + Send>>;

/// Serves a namespace's tenant routes. The server has already authenticated the caller and
/// resolved `ns` from its routing table; `path` is what follows `/ns/{namespace}`.
pub trait ComponentRouter: Send + Sync + 'static {
    /// Handles one request with the namespace's component.
    fn handle(&self, ns: Arc<Namespace>, path: String, req: hyper::Request<hyper::body::Incoming>) -> ResponseFuture;
}
