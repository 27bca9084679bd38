//! Host-side bindings of `memoria:llm` (world `host-api`, imports only; the wasi:http export is
//! bound by wasmtime-wasi-http). Guest resources map to host types kept in the store's table.

wasmtime::component::bindgen!({
    world: "memoria:llm/host-api",
    path: "../../wit",
    imports: { default: async | trappable },
    with: {
        "memoria:llm/session.session": crate::host::session::SessionRes,
        "memoria:llm/session.generation-stream": crate::host::stream::StreamRes,
    },
});

pub use memoria::llm::types::{Error as WitError, Usage as WitUsage};
