//! Ctrl-C and SIGTERM for every long command, handled one way: a command that can stop cleanly
//! says so with [`watch`]; the first signal then asks it to stop at its next safe point (a
//! finished step: it saves what continues the work, releases its folder and names the command
//! that continues), and a second signal stops at once. A command that does not watch stops at
//! once: what it writes is written atomically, and its folder lock is released by the OS.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static WATCHED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// Installs the handler of the two signals (once per process).
pub fn install() {
    INSTALL.call_once(|| {
        let handler = || {
            if !WATCHED.load(Ordering::SeqCst) || REQUESTED.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("stopping after this step (a second Ctrl-C stops at once)");
        };
        // Another handler already installed (a library user's): theirs stays.
        let _ = ctrlc::set_handler(handler);
    });
}

/// Declares that this command checks [`requested`] at its safe points.
pub fn watch() {
    install();
    WATCHED.store(true, Ordering::SeqCst);
}

/// Whether a signal asked the command to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// The flag itself, for loops that take it as an option.
pub fn flag() -> &'static AtomicBool {
    &REQUESTED
}

/// `e`, when it is a stop by a signal inside a command that continues by being run again
/// (the experiment commands), says so: what finished is kept in `kept`.
pub fn continued_by_rerun(e: crate::Error, kept: &std::path::Path) -> crate::Error {
    match e {
        crate::Error::Interrupted(_) => crate::Error::Interrupted(format!(
            "stopped by a signal; what finished is kept in {}: the same command continues",
            kept.display()
        )),
        e => e,
    }
}
