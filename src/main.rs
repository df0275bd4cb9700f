//! The `trueneg` binary: the command line is in [`cli`], the work in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc hands freed memory back to the OS after a short delay. A training step frees and
// re-allocates the same large buffers (logits, activations, gradients) at every step, so it would
// pay the kernel to fault in and zero those pages again each time.
// Freed memory stays mapped (purge delay -1); `MIMALLOC_PURGE_DELAY` in the environment still
// wins.
unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}
/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (the same in v2 and v3).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

fn keep_freed_memory_mapped() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: plain option setter of the linked mimalloc, valid at any time.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

/// Runs `work` on a thread of a rayon pool of its own (`RAYON_NUM_THREADS` threads, else one per
/// CPU), the calling thread sleeping meanwhile; every parallel loop that `work` runs, ours, the
/// product crates' (gemm, faer) and burn's, then runs on that pool.
///
/// Called from the main thread, each of the many parallel operations of a training step (matrix
/// products, kernels, burn's element-wise loops) would be injected into the pool while the main
/// thread waits: one more thread than CPUs, taking turns with the workers (context switches and
/// system time). From a worker thread an operation is split in place,
/// the caller taking a share.
fn on_worker_thread<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    // The main thread's usual stack, not a worker's 2 MiB: the whole command runs there.
    let mut pool = rayon::ThreadPoolBuilder::new().stack_size(8 << 20);
    // A process of a data-parallel job on the CPU takes its share of the node's cores.
    if let Ok(world) = trueneg::dist::World::from_env() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if let Some(n) = world.threads(cores, |k| std::env::var(k).ok()) {
            pool = pool.num_threads(n);
        }
    }
    match pool.build() {
        Ok(pool) => pool.install(work),
        // No threads to be had: run here, as before.
        Err(_) => work(),
    }
}

fn main() -> ExitCode {
    keep_freed_memory_mapped();
    trueneg::io::guard::install_panic_hook();
    // Progress lines and warnings at `info` unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,trueneg=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // A bad command line is one line: clap's message with what it lists (the missing
        // arguments, a tip), without the usage that follows; `--help` and `--version` print
        // as clap prints them.
        Err(e) if e.use_stderr() => {
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:"))
                .filter(|l| !l.is_empty())
                .collect();
            eprintln!("{}", trueneg::error::one_line(&message.join(" ")));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    // `TRUENEG_PARSE_ONLY`: the command line is checked, nothing runs (tests/suite/readme_commands.rs
    // checks every command of the README this way).
    if std::env::var_os("TRUENEG_PARSE_ONLY").is_some() {
        return ExitCode::SUCCESS;
    }
    match on_worker_thread(|| cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", trueneg::error::one_line(&e.to_string()));
            match e.downcast_ref::<trueneg::Error>() {
                // The shell's code for a run stopped by a signal.
                Some(trueneg::Error::Interrupted(_)) => ExitCode::from(130),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
