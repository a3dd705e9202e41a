//! Process signals the daemon listens for: SIGHUP (reload the policies) and SIGTERM or Ctrl-C
//! (shut down).

/// SIGHUP, as a stream (never yields where there is no such signal). Listen before anything
/// slow happens at start-up, so a SIGHUP then queues a reload instead of ending the process.
///
/// # Errors
/// The signal handler cannot be installed.
pub fn hangup() -> std::io::Result<tokio::sync::mpsc::Receiver<()>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                // A reload already queued covers this one too.
                let _ = tx.try_send(());
            }
        });
    }
    #[cfg(not(unix))]
    std::mem::forget(tx);
    Ok(rx)
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}
