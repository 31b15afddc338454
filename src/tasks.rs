//! Tasks that end with their owner: a spawned task's handle that aborts it when dropped,
//! so a stopped controller leaves no task of its own behind.

/// Aborts the task when dropped.
pub struct Owned<T>(tokio::task::JoinHandle<T>);

impl<T: Send + 'static> Owned<T> {
    /// Spawns `future`, owned by the returned handle.
    pub fn spawn(future: impl std::future::Future<Output = T> + Send + 'static) -> Owned<T> {
        Owned(tokio::spawn(future))
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
