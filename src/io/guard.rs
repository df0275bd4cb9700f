//! Third-party decoders (Arrow, Parquet) that panic on some damaged input instead of returning
//! an error: [`decoding`] turns such a panic into an error the caller names its file with, and
//! the binary's panic hook ([`install_panic_hook`]) keeps the caught panic's message off the
//! terminal, so that a damaged file is one line like any other bad input.

use std::cell::Cell;

thread_local! {
    /// Set while this thread runs a [`decoding`] call.
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `decode`; a panic inside it becomes `Err` with its message.
pub fn decoding<T>(decode: impl FnOnce() -> T) -> Result<T, String> {
    let outer = DECODING.with(|d| d.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode));
    DECODING.with(|d| d.set(outer));
    r.map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()));
        format!(
            "damaged data: the decoder failed ({})",
            message.unwrap_or_else(|| "no message".into())
        )
    })
}

/// The process's panic hook: the default one, silent for panics [`decoding`] catches.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !DECODING.with(|d| d.get()) {
            default(info);
        }
    }));
}
