//! Ctrl-C and SIGTERM, handled one way for every command, installed by the command frame
//! ([`crate::frame`]) with the command's own line and the files it holds.
//!
//! - A command that stops at safe points (a finished step: it saves what continues the work,
//!   releases its folder and names the command that continues) is asked to stop by the first
//!   signal; a second stops at once.
//! - Any other command stops at once: the handler prints the command's line saying how to go
//!   on, removes the lock files it holds and its own temporary files, and exits with 130. What
//!   it wrote before is whole (every file is written atomically).
//!
//! SIGXFSZ (a file over `ulimit -f`) is ignored, so that the write fails with an error that
//! names its file instead of killing the process without a word.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static AT_SAFE_POINTS: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// What a stop at once says and removes.
struct OnStop {
    line: String,
    lock_files: Vec<PathBuf>,
    /// Folders where this process's temporary files (`.PID.tmp.*`) are removed.
    folders: Vec<PathBuf>,
}

static ON_STOP: Mutex<Option<OnStop>> = Mutex::new(None);

/// Stops the process at once: the command's line, its locks and temporaries removed, exit 130.
fn stop_now() -> ! {
    let held = ON_STOP.lock().ok().and_then(|mut g| g.take());
    if let Some(h) = held {
        eprintln!("{}", h.line);
        let own = format!(".{}.tmp.", std::process::id());
        for dir in &h.folders {
            for name in crate::io::read::names(dir) {
                if name.starts_with(&own) {
                    let _ = crate::io::write::remove_file(&dir.join(name));
                }
            }
        }
        for f in &h.lock_files {
            let _ = crate::io::write::remove_file(f);
        }
    }
    std::process::exit(130);
}

/// Installs the handler of the two signals (once per process) and ignores SIGXFSZ.
pub fn install() {
    INSTALL.call_once(|| {
        // SAFETY: setting a signal's disposition to "ignore" has no preconditions.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
        let handler = || {
            if !AT_SAFE_POINTS.load(Ordering::SeqCst) || REQUESTED.swap(true, Ordering::SeqCst) {
                stop_now();
            }
            eprintln!("stopping after this step (a second Ctrl-C stops at once)");
        };
        // Another handler already installed (a library user's): theirs stays.
        let _ = ctrlc::set_handler(handler);
    });
}

/// The command's stop: `line` said when it stops at once; `at_safe_points`: the first signal
/// only asks ([`requested`]).
pub fn configure(line: String, at_safe_points: bool) {
    install();
    AT_SAFE_POINTS.store(at_safe_points, Ordering::SeqCst);
    if let Ok(mut g) = ON_STOP.lock() {
        *g = Some(OnStop {
            line,
            lock_files: Vec::new(),
            folders: Vec::new(),
        });
    }
}

/// The lock files the command holds, and the folders it writes into.
pub fn hold(lock_files: Vec<PathBuf>, folders: Vec<PathBuf>) {
    if let Ok(mut g) = ON_STOP.lock()
        && let Some(h) = g.as_mut()
    {
        h.lock_files = lock_files;
        h.folders = folders;
    }
}

/// The command is done with its files: a signal now stops at once without removing them.
pub fn release() {
    if let Ok(mut g) = ON_STOP.lock()
        && let Some(h) = g.as_mut()
    {
        h.lock_files.clear();
        h.folders.clear();
    }
}

/// Whether a signal asked the command to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// The flag itself, for loops that take it as an option.
pub fn flag() -> &'static AtomicBool {
    &REQUESTED
}

/// How a command that continues by being run again (the experiment commands) goes on after a
/// stop: what finished is kept in `kept`.
pub fn kept_in(kept: &std::path::Path) -> String {
    format!(
        "what finished is kept in {}: the same command continues",
        kept.display()
    )
}

/// `e`, when it is a stop by a signal inside a command that continues by being run again,
/// says so ([`kept_in`]).
pub fn continued_by_rerun(e: crate::Error, kept: &std::path::Path) -> crate::Error {
    match e {
        crate::Error::Interrupted(_) => {
            crate::Error::Interrupted(format!("stopped by a signal; {}", kept_in(kept)))
        }
        e => e,
    }
}
