//! The one refusal for work that cannot fit in memory: every command that builds a model or
//! batches compares its estimate (see [`crate::model::footprint`] and the pre-training
//! estimate in `train::memory`) with what this process may still take, before it allocates,
//! and refuses in one line with both figures and the remedy.
//!
//! What the process may take is the least of the limits that apply: the kernel's
//! `MemAvailable`, the cgroup's `memory.max` less its usage, and the process's own address-space
//! limit (`ulimit -v`, `RLIMIT_AS`) less what it has mapped already.

use std::path::Path;

use crate::{Error, Result};

/// A limit on this process's memory, and what it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Available {
    pub bytes: u64,
    /// The limit that gives `bytes`, in words.
    pub source: &'static str,
}

fn read(path: &str) -> Option<String> {
    crate::io::read::read_text(Path::new(path), crate::io::limit::SMALL).ok()
}

/// The value of `key` (in kB) in a `/proc` file of `key: value kB` lines, in bytes.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The soft address-space limit of `/proc/self/limits` (`None`: unlimited or unreadable).
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Whether this process runs under an address-space limit (`ulimit -v`), read once.
pub fn address_space_limited() -> bool {
    static LIMITED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LIMITED.get_or_init(|| own_address_space_limit().is_some())
}

/// This process's soft address-space limit now (`None`: unlimited or unreadable).
fn own_address_space_limit() -> Option<u64> {
    read("/proc/self/limits").and_then(|l| address_space_limit(&l))
}

/// The address space a process needs beyond its resident memory: its code and libraries, its
/// threads' stacks, and the allocator's reservations ahead of use.
const ADDRESS_SPACE_ALLOWANCE: u64 = 512 << 20;

/// What this process may still take (see the module's doc); `None` where nothing can be read.
pub fn available() -> Option<Available> {
    let mem = read("/proc/meminfo")
        .and_then(|m| kb_field(&m, "MemAvailable:"))
        .map(|bytes| Available {
            bytes,
            source: "the kernel's MemAvailable",
        });
    let cg =
        |f: &str| read(&format!("/sys/fs/cgroup/{f}")).and_then(|s| s.trim().parse::<u64>().ok());
    let cgroup = cg("memory.max").map(|max| Available {
        bytes: max.saturating_sub(cg("memory.current").unwrap_or(0)),
        source: "under the cgroup's memory.max",
    });
    // What the process uses against an address-space limit: its resident memory and a fixed
    // allowance for its code, stacks and the allocator's slack. Not the mapped size: the
    // allocator reserves address space ahead in amounts that depend on the limit itself (a
    // whole arena where the limit leaves room for one), which would make a higher limit
    // refuse what a lower one runs.
    let resident = read("/proc/self/status").and_then(|s| kb_field(&s, "VmRSS:"));
    let address = own_address_space_limit().map(|limit| Available {
        bytes: limit.saturating_sub(resident.unwrap_or(0) + ADDRESS_SPACE_ALLOWANCE),
        source: "under the process's address-space limit, ulimit -v",
    });
    [mem, cgroup, address]
        .into_iter()
        .flatten()
        .min_by_key(|a| a.bytes)
}

/// Bytes in GiB (in MiB under one GiB), for the refusal's line.
pub fn gib(bytes: f64) -> String {
    if bytes < (1u64 << 30) as f64 {
        format!("{:.0} MiB", bytes / (1u64 << 20) as f64)
    } else {
        format!("{:.1} GiB", bytes / (1u64 << 30) as f64)
    }
}

/// Refuses `what` (e.g. "fine-tuning with --batch-size 65536 × 128 tokens") when it needs more
/// than [`available`]: `need` bytes at least (an estimate, a floor); `remedy` says what to change.
pub fn check(need: f64, what: &str, remedy: &str) -> Result<()> {
    let Some(have) = available() else {
        return Ok(());
    };
    tracing::debug!(
        "memory: {what} needs at least {}, {} {}",
        gib(need),
        gib(have.bytes as f64),
        have.source
    );
    if need > have.bytes as f64 {
        return Err(Error::Config(format!(
            "{what} needs at least {} of memory, {} available ({}): {remedy}",
            gib(need),
            gib(have.bytes as f64),
            have.source
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_address_space_limit_is_read_from_proc_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         2500000000           unlimited            bytes\n";
        assert_eq!(super::address_space_limit(limits), Some(2_500_000_000));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(super::address_space_limit(unlimited), None);
    }
}
