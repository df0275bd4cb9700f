//! The macro that makes the task registry from one line per task.

/// `module::Type,` per task: declares `mod module;` and the list [`TASKS`](super::TASKS).
macro_rules! tasks {
    ($($module:ident :: $task:ident,)+) => {
        $(mod $module;)+

        /// Every task, in the registry's order.
        pub const TASKS: &[&dyn SentenceTask] = &[$(&$module::$task),+];
    };
}
