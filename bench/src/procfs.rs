//! CPU time and peak memory of a process, read from `/proc` (Linux only): `utime + stime` of
//! `/proc/<pid>/stat` (all threads, finished ones included) and `VmHWM` of `/proc/<pid>/status`.

use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux).
pub fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// User plus system CPU time of `pid` (`"self"` for this process) so far.
pub fn cpu_time(pid: &str, ticks: u64) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the whole line are the 12th and 13th after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / ticks as f64,
    ))
}

/// Peak resident set size of `pid` in bytes (`VmHWM`).
pub fn peak_rss(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `<cores> cores, <model name>, Linux <release>`.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(String::new(), |kb| {
            format!(", {} GiB", (kb + 512 * 1024) / (1024 * 1024))
        });
    format!("{cores} cores, {model}{memory}, Linux {kernel}")
}

/// CPU time the whole machine spent busy (all cores: everything but idle and iowait in
/// `/proc/stat`), so far.
pub fn machine_busy(ticks: u64) -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let busy: u64 = v
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, n)| n)
        .sum();
    Some(Duration::from_secs_f64(busy as f64 / ticks as f64))
}

/// CPU counters at the start of a window: each watched process's and the whole machine's.
#[derive(Debug, Clone)]
pub struct Window {
    pids: Vec<String>,
    cpu: Vec<Option<Duration>>,
    machine: Option<Duration>,
    ticks: u64,
}

/// What a window used: CPU of each watched process (in the order given), and what every other
/// process on the machine used meanwhile (the machine's load).
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Per watched process.
    pub cpu: Vec<Option<Duration>>,
    /// Every other process.
    pub others: Option<Duration>,
}

impl Window {
    /// Reads the counters of `pids` and of the machine now.
    pub fn start(pids: &[String], ticks: u64) -> Window {
        Window {
            pids: pids.to_vec(),
            cpu: pids.iter().map(|p| cpu_time(p, ticks)).collect(),
            machine: machine_busy(ticks),
            ticks,
        }
    }

    /// The CPU used since [`Window::start`].
    pub fn end(&self) -> Usage {
        let delta =
            |a: Option<Duration>, b: Option<Duration>| a.zip(b).map(|(a, b)| a.saturating_sub(b));
        let cpu: Vec<Option<Duration>> = self
            .pids
            .iter()
            .zip(&self.cpu)
            .map(|(p, before)| delta(cpu_time(p, self.ticks), *before))
            .collect();
        let watched: Option<Duration> = cpu.iter().copied().sum();
        let others = delta(machine_busy(self.ticks), self.machine)
            .zip(watched)
            .map(|(m, w)| m.saturating_sub(w));
        Usage { cpu, others }
    }
}
