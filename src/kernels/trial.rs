//! A switch for timing a variant of the code against the code as built, in one process, step
//! by step (`trueneg bench --trial`): code under test reads [`on`] and takes its variant where it
//! is set; the bench sets it for the steps of its second runner only. On a shared machine two
//! separate runs a minute apart can drift by more than a variant changes, so only steps
//! interleaved in one process settle a difference of a few percent. With nothing reading the
//! switch (the code as committed), the two runners do the same work: their ratio is the
//! measurement's own noise.

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// Whether the step running now is the trial's (`bench --trial`'s second runner).
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Sets the switch for the steps that follow, until set again.
pub(crate) fn set(on: bool) {
    ON.store(on, Ordering::Relaxed);
}
