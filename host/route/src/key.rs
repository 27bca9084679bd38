//! A request's routing key: its route label (the namespace of `/ns/{namespace}/...`, empty
//! otherwise) and prompt tokens — tokenized by `memoria_http::request_tokens`, the function the
//! host's handlers use, so router and hosts agree on the tokens by construction — hashed with
//! [`memoria_kv::route_key`], the hosts' block chain under a public root (no salt; see there).

use memoria_kv::BlockHash;
use memoria_kv::route_key::{route_chain, route_root};

/// The route label and the path the host's API sees inside it (`/ns/t1/v1/chat/completions`
/// is label `t1`, path `/v1/chat/completions`).
pub fn label_and_path(path: &str) -> (&str, &str) {
    match path.strip_prefix("/ns/") {
        Some(rest) => match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        },
        None => ("", path),
    }
}

/// The key to rank backends by, and how many leading full blocks of the prompt it stands for:
/// the first full block's routing key (1 block), else a key over the whole short prompt (0),
/// else, for a request without a prompt, the label's root (0).
pub fn routing_key(label: &str, block_tokens: usize, tokens: Option<&[u32]>) -> (BlockHash, usize) {
    let tokens = tokens.unwrap_or(&[]);
    if let Some(first) = route_chain(label, block_tokens, tokens, 1).first() {
        return (*first, 1);
    }
    let root = route_root(label, block_tokens);
    if tokens.is_empty() {
        (root, 0)
    } else {
        (BlockHash::chain(&root, tokens), 0)
    }
}

/// Most blocks of a prompt matched against the hosts' events (the hosts announce as many).
pub const MAX_CHAIN_BLOCKS: usize = 4096;

/// The routing keys of every full block of `tokens` (at most [`MAX_CHAIN_BLOCKS`]), to match
/// against what hosts announced (`--events`); its first key is [`routing_key`]'s when the prompt
/// has a full block.
pub fn routing_chain(label: &str, block_tokens: usize, tokens: &[u32]) -> Vec<BlockHash> {
    route_chain(label, block_tokens, tokens, MAX_CHAIN_BLOCKS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(label_and_path("/v1/models"), ("", "/v1/models"));
        assert_eq!(
            label_and_path("/ns/t1/v1/completions"),
            ("t1", "/v1/completions")
        );
        assert_eq!(label_and_path("/ns/t1"), ("t1", "/"));
        assert_eq!(label_and_path("/ns/"), ("", "/"));
    }

    #[test]
    fn keys_follow_the_first_block() {
        let long: Vec<u32> = (0..40).collect();
        let mut other = long.clone();
        other[30] = 7;
        let (a, n) = routing_key("", 16, Some(&long));
        assert_eq!(n, 1);
        assert_eq!(routing_key("", 16, Some(&other)).0, a);
        assert_ne!(routing_key("t", 16, Some(&long)).0, a);
        let (s, n) = routing_key("", 16, Some(&long[..5]));
        assert_eq!(n, 0);
        assert_ne!(s, routing_key("", 16, Some(&long[..6])).0);
        assert_eq!(routing_key("", 16, None), routing_key("", 16, Some(&[])));
        let chain = routing_chain("", 16, &long);
        assert_eq!((chain.len(), chain[0]), (2, a));
    }
}
