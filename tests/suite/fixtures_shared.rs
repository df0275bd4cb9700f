//! The shared fixtures' cache (`tests/common/fixture_cache.rs`): a fixture asked for by several
//! tests at once is built once, and what a killed build left is never taken for a fixture.

use crate::common::fixture_cache::{Recipe, cached};

use std::sync::atomic::{AtomicUsize, Ordering};

/// A kind of fixture of this test process alone, so that runs side by side do not meet.
fn kind(what: &str) -> String {
    format!("selftest-{what}-{}", std::process::id())
}

#[test]
fn a_fixture_asked_for_by_many_threads_at_once_is_built_once_and_whole() {
    let name = kind("threads");
    let recipe = Recipe {
        name: &name,
        inputs: &[],
        args: &["a"],
    };
    let builds = AtomicUsize::new(0);
    let paths: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let dir = cached(&recipe, |dir| {
                        builds.fetch_add(1, Ordering::SeqCst);
                        std::fs::write(dir.join("first"), "1").unwrap();
                        // Slow enough that the other threads ask while it builds.
                        std::thread::sleep(std::time::Duration::from_millis(300));
                        std::fs::write(dir.join("last"), "2").unwrap();
                    });
                    assert!(dir.join("last").is_file(), "a fixture seen half built");
                    dir
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(builds.load(Ordering::SeqCst), 1, "built once");
    assert!(paths.windows(2).all(|w| w[0] == w[1]), "{paths:?}");
    // Other arguments are another fixture, and replace this kind's earlier one.
    let other = cached(
        &Recipe {
            name: &name,
            inputs: &[],
            args: &["b"],
        },
        |dir| std::fs::write(dir.join("last"), "3").unwrap(),
    );
    assert_ne!(other, paths[0]);
    assert_eq!(std::fs::read_to_string(other.join("last")).unwrap(), "3");
    assert!(!paths[0].exists(), "the stale fixture is removed");
    remove(&other, &name);
}

/// A self-test's fixture and its lock file, removed.
fn remove(dir: &std::path::Path, name: &str) {
    let root = dir.parent().unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_file(root.join(format!("{name}.lock"))).unwrap();
}

#[test]
fn what_a_killed_build_left_is_removed_and_built_again() {
    let name = kind("killed");
    let recipe = Recipe {
        name: &name,
        inputs: &[],
        args: &[],
    };
    // A first build that panics midway, as a killed process would stop.
    let first = std::panic::catch_unwind(|| {
        cached(&recipe, |dir| {
            std::fs::write(dir.join("half"), "x").unwrap();
            panic!("killed");
        })
    });
    assert!(first.is_err());
    let dir = cached(&recipe, |dir| {
        std::fs::write(dir.join("whole"), "y").unwrap()
    });
    assert!(dir.join("whole").is_file());
    assert!(!dir.join("half").exists(), "the half-built files are gone");
    let leftovers: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{name}--")) && !dir.ends_with(n))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    remove(&dir, &name);
}
