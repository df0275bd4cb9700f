//! The frame every command runs inside. A command declares a [`Plan`]: the paths it reads with
//! the kind each must be, the paths it writes with how it owns them, the memory it needs, and
//! how it stops. [`execute`] alone then does, in this order:
//!
//! 1. classifies every input ([`inputs::classify`]): a path of the wrong kind is one line naming
//!    it, what it is and what its flag takes;
//! 2. claims every output ([`claim::claim`]): takes its lock and checks that it is new, empty
//!    or the same command's work, before anything is removed or written; a folder the command
//!    would write into that is (or holds) one of its inputs is refused;
//! 3. asks the one memory estimate ([`crate::memory::check`]) for what the plan needs;
//! 4. runs the work under the one stop handler ([`crate::stop`]): a signal gives one line
//!    saying how to continue and releases the locks; a file-size limit is an error line;
//! 5. on failure, leaves a folder it made (or found empty) as it was when nothing was written
//!    there; the work's files are written atomically, so a failure leaves each whole or absent;
//! 6. removes the temporary files that killed earlier writers left in its folders (at claim).
//!
//! The command-line's subcommands are each one value of one trait whose plan goes through here
//! (`cli::Command`); `tests/suite/architecture.rs` checks that locks, claims, the stop handler
//! and the output writer are made nowhere else.

pub mod claim;
pub mod inputs;
pub mod plan;

pub use claim::{Claim, Owned};
pub use inputs::{FileKind, InputKind};
pub use plan::{Need, OutputKind, Plan, Stops};

/// Runs `work` inside the frame of `plan` (see the module's doc).
pub fn execute<T, E: From<crate::Error>>(
    plan: &Plan,
    work: impl FnOnce(&Claim) -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    crate::stop::configure(
        plan.stop_line(),
        matches!(plan.stops, Stops::AtSafePoints { .. }),
    );
    for input in &plan.inputs {
        inputs::classify(&input.path, &input.flag, input.kind)?;
    }
    let claim = claim::claim(plan)?;
    crate::stop::hold(claim.lock_files(), claim.written_folders());
    for need in &plan.memory {
        if let Err(e) = crate::memory::check(need.bytes, &need.what, &need.remedy) {
            claim.undo_fresh();
            return Err(e.into());
        }
    }
    let result = work(&claim);
    crate::stop::release();
    match result {
        Ok(v) => Ok(v),
        Err(e) => {
            claim.undo_fresh();
            Err(e)
        }
    }
}

/// Runs `work` with the folder `dir` claimed as the output folder of `command` (its one
/// output, [`OutputKind::Folder`]): the frame for a library caller that writes into one folder,
/// as `prepare` does.
pub fn in_folder<T>(
    command: &str,
    dir: &std::path::Path,
    work: impl FnOnce(&Owned) -> crate::Result<T>,
) -> crate::Result<T> {
    let plan = Plan::new(command).output("--out", dir, OutputKind::Folder);
    execute(&plan, |claim| work(claim.folder("--out")))
}
