//! Webhook settings: errors name the key and the reason and never the URL; URLs from a file
//! or the environment; the example of docs/notifications.md.

use std::time::Duration;

use gslb::config::Settings;

fn load(text: &str) -> Result<Settings, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("gslb.toml");
    std::fs::write(&file, text).expect("write");
    Settings::load(&file).map_err(|e| e.to_string())
}

#[test]
fn bad_webhook_settings_name_the_key_and_the_reason() {
    let entry = |extra: &str| {
        format!(
            "[[notify.webhooks]]\nname = \"ops\"\nurl = \"https://hooks.example.test/T/B/secret\"\n{extra}"
        )
    };
    for (text, key, reason) in [
        (
            "[[notify.webhooks]]\nname = \"ops\"\n".to_owned(),
            "notify.webhooks[0]",
            "set exactly one of url, url_file and url_env",
        ),
        (
            entry("url_env = \"SLACK_URL\"\n"),
            "notify.webhooks[0]",
            "exactly one",
        ),
        (
            "[[notify.webhooks]]\nname = \"Ops Team\"\nurl = \"https://x.test/\"\n".to_owned(),
            "notify.webhooks[0].name",
            "a-z, 0-9",
        ),
        (
            format!("{}{}", entry(""), entry("")),
            "notify.webhooks[1].name",
            "'ops' is used twice",
        ),
        (
            "[[notify.webhooks]]\nname = \"ops\"\nurl_env = \"GSLB_SLACK\"\n".to_owned(),
            "notify.webhooks[0].url_env",
            "outside GSLB_*",
        ),
        (
            entry("events = []\n"),
            "notify.webhooks[0].events",
            "lists no event",
        ),
        (
            entry("max_attempts = 0\n"),
            "notify.webhooks[0].max_attempts",
            "between 1 and 20",
        ),
        (
            entry("timeout = \"10ms\"\n"),
            "notify.webhooks[0].timeout",
            "between 100ms and 5m",
        ),
        (
            entry("backoff = \"2m\"\n"),
            "notify.webhooks[0].backoff",
            "at most max_backoff",
        ),
        (
            entry("queue = 0\n"),
            "notify.webhooks[0].queue",
            "between 1 and 100000",
        ),
    ] {
        let e = load(&text).expect_err(key);
        assert!(e.contains(&format!("{key}: ")), "{e}");
        assert!(e.contains(reason), "{key}: {e}");
        assert!(!e.contains("secret"), "the URL is never printed: {e}");
    }
    // Wrong values and unknown keys: the `config` crate names the key.
    for (extra, needle) in [
        ("format = \"teams\"\n", "teams"),
        ("events = [\"probe\"]\n", "probe"),
        ("retries = 3\n", "retries"),
    ] {
        let e = load(&entry(extra)).expect_err(needle);
        assert!(e.contains(needle), "{e}");
        assert!(!e.contains("/T/B/secret"), "{e}");
    }
    let e =
        load("[[notify.webhooks]]\nname = \"ops\"\nurl = \"ftp://hooks.example.test/secret\"\n")
            .expect_err("ftp");
    assert!(
        e.contains("notify.webhooks[0].url: not an http(s) URL"),
        "{e}"
    );
    assert!(!e.contains("secret"), "{e}");
}

#[test]
fn webhook_urls_come_from_a_file_or_the_environment_and_never_show() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("gslb.toml");
    std::fs::write(
        &file,
        "[[notify.webhooks]]\nname = \"slack\"\nurl_file = \"secrets/slack-url\"\nformat = \"slack\"\n\n\
         [[notify.webhooks]]\nname = \"pager\"\nurl_env = \"PAGER_WEBHOOK_URL\"\nevents = [\"switch\"]\n",
    )
    .expect("write");
    let settings = Settings::load(&file).expect("valid");
    assert_eq!(
        settings.notify.webhooks[0].url_file,
        Some(dir.path().join("secrets/slack-url"))
    );
    let e = settings
        .notify
        .resolve(|_| None)
        .expect_err("missing file")
        .to_string();
    assert!(
        e.starts_with("notify.webhooks[0].url_file: cannot read "),
        "{e}"
    );
    // As `gslb run` prints it (the error and its causes): the reason once, not twice.
    let chain = format!(
        "{:#}",
        anyhow::Error::new(settings.notify.resolve(|_| None).expect_err("missing file"))
    );
    assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
    std::fs::create_dir(dir.path().join("secrets")).expect("mkdir");
    std::fs::write(
        dir.path().join("secrets/slack-url"),
        "https://hooks.slack.test/services/T/B/XyZ\n",
    )
    .expect("write");
    let e = settings
        .notify
        .resolve(|_| None)
        .expect_err("unset env")
        .to_string();
    assert_eq!(
        e,
        "notify.webhooks[1].url_env: PAGER_WEBHOOK_URL is not set"
    );
    let e = settings
        .notify
        .resolve(|_| Some("not a url XyZ".into()))
        .expect_err("not a URL")
        .to_string();
    assert_eq!(
        e,
        "notify.webhooks[1].url_env: does not hold an http(s) URL"
    );
    let hooks = settings
        .notify
        .resolve(|v| (v == "PAGER_WEBHOOK_URL").then(|| "http://127.0.0.1:9/pager".into()))
        .expect("resolved");
    assert_eq!(
        hooks[0].url.as_str(),
        "https://hooks.slack.test/services/T/B/XyZ"
    );
    assert_eq!(hooks[0].timeout, Duration::from_secs(5));
    assert_eq!(hooks[0].max_attempts, 5);
    assert_eq!(hooks[0].queue, 256);
    assert_eq!(hooks[1].url.as_str(), "http://127.0.0.1:9/pager");
    let shown = format!("{hooks:?}");
    assert!(
        !shown.contains("XyZ") && !shown.contains(":9/pager"),
        "{shown}"
    );
    std::fs::write(
        &file,
        "[[notify.webhooks]]\nname = \"ops\"\nurl = \"https://hooks.slack.test/services/T/B/XyZ\"\n",
    )
    .expect("write");
    let shown = format!("{:?}", Settings::load(&file).expect("valid"));
    assert!(!shown.contains("XyZ"), "{shown}");
}

#[test]
fn the_documented_example_is_valid_and_states_the_defaults() {
    let page = include_str!("../docs/notifications.md");
    let start = page.find("```toml\n").expect("example") + "```toml\n".len();
    let example = &page[start..start + page[start..].find("```").expect("end")];
    let written = load(example).expect("the example of docs/notifications.md loads");
    let defaults = load(
        "[[notify.webhooks]]\nname = \"ops-slack\"\nurl_file = \"secrets/slack-webhook-url\"\n",
    )
    .expect("defaults");
    let (w, d) = (&written.notify.webhooks[0], &defaults.notify.webhooks[0]);
    assert_eq!(
        (
            w.events.clone(),
            w.timeout,
            w.max_attempts,
            w.backoff,
            w.max_backoff,
            w.queue
        ),
        (
            d.events.clone(),
            d.timeout,
            d.max_attempts,
            d.backoff,
            d.max_backoff,
            d.queue
        ),
        "the example shows the defaults"
    );
}
