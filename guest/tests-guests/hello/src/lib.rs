//! hello: the smallest wasi:http guest (answers `hello from {path}`), for the HTTP-path
//! benchmark and for requests that must keep working while other namespaces misbehave.

use memoria_guest::http::{self, IncomingRequest, ResponseOutparam};

struct Hello;

impl http::Handler for Hello {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let body = format!("hello from {}", http::path(&req));
        http::respond(out, 200, "text/plain", body.as_bytes());
    }
}

http::export!(Hello);
