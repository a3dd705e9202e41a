//! DNS names as policies write them: normalising (lower-case, no trailing dot) and checking
//! one. Shared by the validation of every table that names a host; knows nothing of policies.

/// Whether `name` (normalised) is a DNS name: dot-separated labels of 1-63 letters, digits and
/// hyphens, not starting or ending with a hyphen, 253 characters at most, and not an IP address.
pub(super) fn is_dns_name(name: &str) -> bool {
    name.len() <= 253
        && name.parse::<std::net::IpAddr>().is_err()
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Lower-case, without a trailing dot.
pub(super) fn normalise_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}
