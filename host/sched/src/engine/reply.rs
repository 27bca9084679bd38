//! The engine's answer channel for one command. A [`Reply`] that is dropped unsent while its
//! thread unwinds from a panic answers `EngineError::Panicked` naming its command, so a caller
//! never waits on (or misreads as "stopped") a command that failed inside the engine.

use tokio::sync::oneshot;

use crate::EngineError;

/// Where one command's result goes.
pub(crate) struct Reply<T> {
    tx: Option<oneshot::Sender<Result<T, EngineError>>>,
    command: &'static str,
}

impl<T> Reply<T> {
    /// A reply for the command called `command` and the receiver its caller awaits.
    pub fn channel(command: &'static str) -> (Reply<T>, oneshot::Receiver<Result<T, EngineError>>) {
        let (tx, rx) = oneshot::channel();
        (
            Reply {
                tx: Some(tx),
                command,
            },
            rx,
        )
    }

    /// Whether the caller has gone away (nothing would receive the result).
    pub fn is_closed(&self) -> bool {
        self.tx.as_ref().is_none_or(oneshot::Sender::is_closed)
    }

    /// Delivers the result; false when the caller has gone away.
    pub fn send(mut self, r: Result<T, EngineError>) -> bool {
        self.tx.take().is_some_and(|tx| tx.send(r).is_ok())
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take()
            && std::thread::panicking()
        {
            let _ = tx.send(Err(EngineError::Panicked(self.command)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_dropped_in_a_panic_names_its_command() {
        let (reply, mut rx) = Reply::<u32>::channel("warm");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = reply;
            panic!("injected");
        }));
        assert!(r.is_err());
        match rx.try_recv() {
            Ok(Err(EngineError::Panicked("warm"))) => {}
            other => panic!("expected Panicked(warm), got {other:?}"),
        }
    }

    #[test]
    fn a_reply_dropped_normally_closes_the_channel() {
        let (reply, mut rx) = Reply::<u32>::channel("open");
        drop(reply);
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        let (reply, mut rx) = Reply::<u32>::channel("open");
        assert!(reply.send(Ok(3)));
        assert!(matches!(rx.try_recv(), Ok(Ok(3))));
    }
}
