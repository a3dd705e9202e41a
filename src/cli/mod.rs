//! The commands: `gslb run` ([`run`]: the controller with the admin API, webhooks, the
//! failover timeline and policy reload), `check`, `plan`, `replay`, `demo`, the drill, re-arm
//! and events clients of the admin API, and the container health check. The binary parses
//! the command line and calls these.
//!
//! Must not name a concrete provider: `gslb run` and `gslb plan` get theirs from the binary's
//! [`run::Bind`].

pub mod check;
pub mod demo;
pub mod drill;
pub mod etcd_auth;
pub mod healthcheck;
pub mod plan;
pub mod preflight;
pub mod replay;
pub mod run;

/// Whether `error` is, somewhere in its chain, a write to a reader that went away (a closed
/// pipe: `gslb plan | head`). The binary then exits quietly with 0, as `head`'s writer would.
pub fn closed_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `error` and its causes as one line for an operator: joined with `: ` like anyhow's `{:#}`,
/// but a cause whose text the line already holds is left out (many errors quote their source
/// in their own message, which printed it twice), and Rust's ` (os error N)` suffix is dropped
/// (the OS text before it says it).
pub fn describe(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        let text = gslb_core::policy::file::without_os_error(&text);
        if line.contains(text.as_str()) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn a_cause_already_quoted_is_not_repeated_and_os_error_numbers_go() {
        let io = std::io::Error::from_raw_os_error(2);
        let inner = anyhow::Error::new(io)
            .context("cannot open /x/audit.jsonl: No such file or directory (os error 2)");
        let outer = inner.context("opening the audit log");
        assert_eq!(
            describe(&outer),
            "opening the audit log: cannot open /x/audit.jsonl: No such file or directory"
        );
    }
}
