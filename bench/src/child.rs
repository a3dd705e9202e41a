//! The benchmark's helper processes (origins, the Cloudflare fake): this program run again in
//! an internal mode, talking over pipes; each exits when its standard input closes, so none
//! outlives the benchmark.

use std::io::{BufReader, Read};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Starts this program with `args`, standard input and output piped (standard error shared).
pub fn spawn_self(args: &[String]) -> anyhow::Result<(Child, ChildStdin, BufReader<ChildStdout>)> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    Ok((child, stdin, BufReader::new(stdout)))
}

/// The child's side: resolves once standard input is closed (the parent went away).
pub fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    rx
}
