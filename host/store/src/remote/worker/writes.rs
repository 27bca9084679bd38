//! Writes to the remote tier: queued blocks drained in pipelines of `SET .. EX` bounded in count
//! and bytes after a short linger, encoded (LZ4, checksum, the hosts' tag) on a blocking thread
//! so reads never wait behind the encoder; barriers answered once what came before is sent.

use memoria_kv::BlockHash;

use super::*;

/// Most writes in one pipeline.
pub(crate) const WRITE_RUN: usize = 64;
/// Raw bytes past which a write pipeline is sent (at least one block): the server's query
/// buffer and a read queued behind the pipeline wait for at most about this much.
pub(crate) const WRITE_RUN_BYTES: u64 = 4 << 20;

/// A block queued for writing under `key`.
pub(crate) struct QueuedBlock {
    pub key: String,
    pub identity: BlockIdentity,
    /// The namespace's chain root (written in the shared form's place of the salt).
    pub root: BlockHash,
    pub tokens: Vec<u32>,
    pub data: Vec<u8>,
}

pub(crate) enum Write {
    Block(Box<QueuedBlock>),
    Barrier(std::sync::mpsc::Sender<()>),
    Stop,
}

impl Write {
    /// The raw bytes it carries (a block's), 0 for the others.
    fn raw_bytes(&self) -> u64 {
        match self {
            Write::Block(b) => b.data.len() as u64,
            _ => 0,
        }
    }
}

/// The shared-form values of queued blocks, sealed under their keys; one that does not encode
/// is left out.
pub(super) fn encode_all(
    blocks: Vec<QueuedBlock>,
    auth: &RemoteKey,
) -> Vec<(String, Vec<u8>, BlockHash)> {
    blocks
        .into_iter()
        .filter_map(|b| {
            let QueuedBlock {
                key,
                identity,
                root,
                tokens,
                data,
            } = b;
            let v = codec::encode_shared(&identity, &root, &tokens, &data, Encoding::Lz4).ok()?;
            let v = auth.seal(&key, v);
            Some((key, v, identity.hash))
        })
        .collect()
}

pub(super) async fn write_loop(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    mut rx: mpsc::UnboundedReceiver<Write>,
) {
    let st = shared.stats.clone();
    let ttl = shared.opts.ttl_s;
    loop {
        let Some(first) = rx.recv().await else { return };
        // The linger (`write_linger_ms`): a decoding session seals a block every few dozen
        // steps, and each send wakes this thread, the encoder and the server on the cores the
        // engine's threads spin on, so fewer, larger sends cost decode less.
        let linger_until = tokio::time::Instant::now() + shared.opts.write_linger();
        let mut bytes = first.raw_bytes();
        let mut urgent = !matches!(first, Write::Block(_));
        let mut batch = vec![first];
        loop {
            while batch.len() < WRITE_RUN && bytes < WRITE_RUN_BYTES {
                match rx.try_recv() {
                    Ok(w) => {
                        bytes += w.raw_bytes();
                        urgent |= !matches!(w, Write::Block(_));
                        batch.push(w);
                    }
                    Err(_) => break,
                }
            }
            let full = batch.len() >= WRITE_RUN || bytes >= WRITE_RUN_BYTES;
            if urgent || full || tokio::time::Instant::now() >= linger_until {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(linger_until) => {}
                () = shared.write_wake.notified() => {}
            }
        }
        let mut blocks = Vec::new();
        let mut barriers = Vec::new();
        let mut stop = false;
        for w in batch {
            match w {
                Write::Block(b) => {
                    RemoteStats::sub(&st.queue_bytes, b.data.len() as u64);
                    RemoteStats::sub(&st.queue_blocks, 1);
                    blocks.push(*b);
                }
                Write::Barrier(tx) => barriers.push(tx),
                Write::Stop => stop = true,
            }
        }
        // Encoding (LZ4, checksum) runs on a blocking thread so reads keep flowing meanwhile.
        // An encoder that panicked loses its blocks: dropped and counted, as a lossy cache does.
        let n_blocks = blocks.len() as u64;
        let auth = shared.key.clone();
        let sets = tokio::task::spawn_blocking(move || encode_all(blocks, &auth))
            .await
            .unwrap_or_default();
        RemoteStats::add(&st.writes_dropped, n_blocks - sets.len() as u64);
        if !sets.is_empty() {
            let n = sets.len() as u64;
            let (kv, hashes): (Vec<_>, Vec<_>) =
                sets.into_iter().map(|(k, v, h)| ((k, v), h)).unzip();
            let kv = &kv;
            let r = guarded_with(
                &shared,
                &conn,
                |mut m| async move { m.set_many(kv, ttl).await },
                |acked| !acked.contains(&false),
            )
            .await;
            match r {
                Ok(acked) => {
                    for ((acked, (_, v)), h) in acked.into_iter().zip(kv).zip(&hashes) {
                        if acked {
                            RemoteStats::add(&st.writes, 1);
                            RemoteStats::add(&st.bytes_written, v.len() as u64);
                            shared.seen.mark_known(h);
                        } else {
                            RemoteStats::add(&st.write_errors, 1);
                        }
                    }
                }
                Err(Fail::Breaker) => RemoteStats::add(&st.writes_dropped, n),
                Err(_) => RemoteStats::add(&st.write_errors, n),
            }
        }
        for b in barriers {
            let _ = b.send(());
        }
        if stop {
            return;
        }
    }
}
