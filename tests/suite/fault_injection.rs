//! What a fault-injection run found: concurrent writers, kills during pruning, damaged
//! checkpoints, signals, out-of-range values, folders that must not be overwritten.

use crate::common;
use common::{bin, data, fails, metrics, ok, pretrain_cmd, resume_cmd, shards};

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use trueneg::io::lock::{FolderLock, LOCK_FILE};

fn wait_for(path: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {}",
            path.display()
        );
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// (step, loss, grad norm, masked) of every metrics line.
fn curve(run: &Path) -> Vec<(u64, f64, f64, usize)> {
    metrics(run)
        .into_iter()
        .map(|m| (m.step, m.loss, m.grad_norm, m.masked))
        .collect()
}

#[test]
fn folder_lock_names_its_holder_and_recognises_stale_locks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("out");
    let a = FolderLock::acquire(&d, "first").unwrap();
    assert!(a.stale.is_none());
    let e = FolderLock::acquire(&d, "second").unwrap_err().to_string();
    assert!(
        e.contains(&format!("pid {}", std::process::id())) && e.contains("first"),
        "{e}"
    );
    drop(a);
    assert!(!d.join(LOCK_FILE).exists(), "removed by its holder");
    // The file of a process killed with -9 stays, but its OS lock does not.
    std::fs::write(d.join(LOCK_FILE), "pid 4194303\nkilled\n").unwrap();
    let b = FolderLock::acquire(&d, "third").unwrap();
    assert_eq!(b.stale.as_deref(), Some("pid 4194303, killed"));
}

#[test]
fn a_second_pretrain_on_a_run_folder_is_refused_and_a_killed_holder_is_not_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut child = pretrain_cmd(&run, &["train.steps=100000"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        &run.join("checkpoints/step-00000003/state.json"),
        &mut child,
    );
    let e = fails(resume_cmd(&run).output().unwrap());
    assert!(
        e.contains(&format!("pid {}", child.id())) && e.contains("in use"),
        "{e}"
    );
    let e = fails(pretrain_cmd(&run, &[]).output().unwrap());
    assert!(e.contains(&format!("pid {}", child.id())), "{e}");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(run.join(LOCK_FILE).exists(), "kill -9 leaves the lock file");
    let last = trueneg::train::checkpoint::list(&run).last().unwrap().0;
    ok(resume_cmd(&run)
        .arg("--set")
        .arg(format!("train.steps={}", last + 2))
        .output()
        .unwrap());
    assert!(!run.join(LOCK_FILE).exists());
    assert_eq!(metrics(&run).last().unwrap().step, last + 2);
}

#[test]
fn resume_skips_damaged_and_partial_checkpoints_and_cleans_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    ok(pretrain_cmd(&full, &[]).output().unwrap());
    let run = dir.path().join("run");
    assert!(
        std::process::Command::new("cp")
            .arg("-r")
            .arg(&full)
            .arg(&run)
            .status()
            .unwrap()
            .success()
    );
    let ck = run.join("checkpoints");
    // The two newest checkpoints damaged (disk trouble), and what kills during pruning and
    // saving used to leave: a folder with only its model, an empty one, hidden leftovers.
    let newest = ck.join("step-00000012/model.safetensors");
    let bytes = std::fs::read(&newest).unwrap();
    std::fs::write(&newest, &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(ck.join("step-00000009/state.json"), "{\"step\": ").unwrap();
    std::fs::create_dir_all(ck.join("step-00000001")).unwrap();
    std::fs::copy(
        ck.join("step-00000003/model.safetensors"),
        ck.join("step-00000001/model.safetensors"),
    )
    .unwrap();
    std::fs::create_dir_all(ck.join("step-00000002")).unwrap();
    std::fs::create_dir_all(ck.join(".step-00000004.del")).unwrap();
    std::fs::create_dir_all(ck.join(".step-00000010.tmp")).unwrap();
    let out = resume_cmd(&run).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    ok(out);
    assert_eq!(
        log.matches("skipping a damaged checkpoint").count(),
        2,
        "{log}"
    );
    assert_eq!(curve(&run), curve(&full), "resumed from step 6");
    let mut left: Vec<String> = std::fs::read_dir(&ck)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    left.sort();
    // The hidden leftovers go; folders the program did not mark (a model without state, an
    // empty one: saving never leaves them, so a person made them) stay untouched.
    let expected: Vec<String> = [1, 2, 3, 6, 9, 12]
        .iter()
        .map(|s| format!("step-{s:08}"))
        .collect();
    assert_eq!(
        left, expected,
        "only the program's own leftovers are removed"
    );
}

#[test]
fn paths_resolve_from_anywhere_and_a_finished_run_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    ok(pretrain_cmd(&full, &[]).output().unwrap());
    // data.shards given relative to the first working directory.
    let rel = pathdiff(shards(), dir.path());
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=3"])
        .current_dir(dir.path())
        .arg("--set")
        .arg(format!("data.shards={}", rel.display()))
        .output()
        .unwrap());
    let cfg = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(cfg.contains(&shards().display().to_string()), "{cfg}");
    ok(bin()
        .current_dir("/")
        .args(["pretrain", "--resume"])
        .arg(&run)
        .args(["--set", "train.steps=12"])
        .output()
        .unwrap());
    assert_eq!(metrics(&run).last().unwrap().step, 12);
    assert!(run.join("loss.png").exists(), "loss curve drawn at the end");
    // A finished run says so and changes nothing.
    let before = std::fs::read(run.join("metrics.jsonl")).unwrap();
    let out = ok(resume_cmd(&run).output().unwrap());
    assert!(out.contains("already finished"), "{out}");
    assert_eq!(before, std::fs::read(run.join("metrics.jsonl")).unwrap());
}

/// `target` relative to `base` (both absolute).
fn pathdiff(target: &Path, base: &Path) -> std::path::PathBuf {
    let t: Vec<_> = target.components().collect();
    let b: Vec<_> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = std::path::PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

/// SIGTERM mid-window (log_every = 4): the stop checkpoint carries the open window, so the
/// resumed run's lines, `masked` totals included, are those of an uninterrupted run.
#[test]
fn sigterm_checkpoints_and_the_run_resumes_on_the_same_curve() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    ok(pretrain_cmd(&full, &["train.log_every=4"])
        .output()
        .unwrap());
    assert_eq!(curve(&full).len(), 3);
    let run = dir.path().join("run");
    let mut child = pretrain_cmd(&run, &["train.checkpoint_every=1000", "train.log_every=4"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&run.join("metrics.jsonl"), &mut child);
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("--resume"), "{err}");
    let (stopped, _) = trueneg::train::checkpoint::list(&run)
        .pop()
        .unwrap_or_else(|| panic!("no checkpoint: {err}"));
    assert!(stopped < 12, "stopped early: {err}");
    assert!(!run.join(LOCK_FILE).exists());
    ok(resume_cmd(&run).output().unwrap());
    assert_eq!(curve(&run), curve(&full));
}

#[test]
fn progress_is_plain_log_lines_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, rust_log: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_trueneg"));
        c.args(["pretrain", "--config", "tiny", "--run"])
            .arg(dir.path().join(name))
            .arg("--set")
            .arg(format!("data.shards={}", shards().display()));
        for s in ["train.steps=4", "train.log_every=2", "data.batch_size=4"] {
            c.args(["--set", s]);
        }
        match rust_log {
            Some(l) => c.env("RUST_LOG", l),
            None => c.env_remove("RUST_LOG"),
        };
        let out = c.output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = run("a", None);
    assert!(
        err.contains("step 2/4") && err.contains("step 4/4") && err.contains("tok/s"),
        "{err}"
    );
    assert!(
        !run("b", Some("warn")).contains("step 2/4"),
        "RUST_LOG is honoured"
    );
}

#[test]
fn out_of_range_values_name_their_field_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (set, field) in [
        ("optimizer.lr=-1", "optimizer.lr"),
        ("optimizer.lr=nan", "optimizer.lr"),
        ("optimizer.eps=-1e-6", "optimizer.eps"),
        ("optimizer.weight_decay=-0.1", "optimizer.weight_decay"),
        ("optimizer.max_grad_norm=-1", "optimizer.max_grad_norm"),
        ("optimizer.beta1=1", "optimizer.beta1"),
        ("train.disc_weight=-50", "train.disc_weight"),
        ("masking.mask_frac=-0.1", "masking.mask_frac"),
        ("masking.max_predictions=0", "masking.max_predictions"),
        ("train.checkpoint_every=0", "train.checkpoint_every"),
        ("train.log_every=0", "train.log_every"),
        ("model.layer_norm_eps=0", "model.layer_norm_eps"),
        ("model.generator_size=0", "model.generator_size"),
        ("train.steps=abc", "train.steps"),
        ("data.max_seq_len=32", "data.max_seq_len"),
    ] {
        let run = dir.path().join("r");
        let e = fails(pretrain_cmd(&run, &[set]).output().unwrap());
        assert!(e.contains(&format!("`{field}`")), "{set}: {e}");
        assert!(
            !run.join("config.toml").exists() && !run.join("checkpoints").exists(),
            "{set}: nothing written"
        );
        let _ = std::fs::remove_dir_all(&run);
    }
    // --resume on a folder that is not a run, and on no folder.
    let e = fails(resume_cmd(dir.path()).output().unwrap());
    assert!(
        e.contains("is a folder without config.toml")
            && e.contains("--resume takes a pre-training run"),
        "{e}"
    );
    let e = fails(resume_cmd(dir.path().join("nope")).output().unwrap());
    assert!(
        e.contains("no such file or folder; --resume takes a pre-training run"),
        "{e}"
    );
}

#[test]
fn prepare_never_overwrites_a_users_folder_and_restarts_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("tokenizer.json"), "my own file").unwrap();
    let prep = |out: &Path| {
        let mut c = bin();
        c.args(["prepare", "--input"])
            .arg(data("wikitext-2/wiki.valid.tokens"))
            .args(["--train-vocab", "500", "--max-seq-len", "32", "--out"])
            .arg(out);
        c
    };
    let e = fails(prep(&mine).output().unwrap());
    assert!(
        e.contains("holds files that trueneg did not write") && e.contains("nothing was changed"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("tokenizer.json")).unwrap(),
        "my own file"
    );
    assert!(!mine.join(LOCK_FILE).exists());
    // A prepare killed half-way: its stale lock and partial shard.
    let killed = dir.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    std::fs::write(killed.join(LOCK_FILE), "pid 4194303\ntrueneg prepare\n").unwrap();
    std::fs::write(killed.join("shard-00000.bin"), [1u8, 2, 3]).unwrap();
    trueneg::io::outputs::set_owner(&killed, "trueneg prepare").unwrap();
    ok(prep(&killed).output().unwrap());
    assert!(
        std::fs::metadata(killed.join("shard-00000.bin"))
            .unwrap()
            .len()
            > 3
    );
    // A held folder is refused, naming the holder.
    let held = dir.path().join("held");
    let _lock = FolderLock::acquire(&held, "another prepare").unwrap();
    let e = fails(prep(&held).output().unwrap());
    assert!(e.contains("another prepare"), "{e}");
}

#[test]
fn finetune_output_folders_are_claimed_not_overwritten() {
    use trueneg::finetune::out_folder::{choose_out, claim_out};
    let dir = tempfile::tempdir().unwrap();
    let default = dir.path().join("model/finetune/SST-2");
    let settings = serde_json::json!({"task": "SST-2"});
    let claim = |out: &std::path::Path| {
        trueneg::frame::in_folder("finetune", out, |o| claim_out(o, &settings).map(|c| c.dir))
    };
    let a = choose_out(None, &default, &settings);
    assert_eq!(a, default);
    claim(&a).unwrap();
    std::fs::write(a.join("results.json"), "{}").unwrap();
    // The default is taken: the next run writes beside it.
    let b = choose_out(None, &default, &settings);
    assert_eq!(b, dir.path().join("model/finetune/SST-2-2"));
    // An explicit --out that holds results is refused and left as it was.
    let e = claim(&a).unwrap_err().to_string();
    // It says what to do: a free name beside it, never a folder inside it.
    assert!(
        e.contains("holds a finished fine-tuning run") && e.contains("SST-2-2"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(a.join("results.json")).unwrap(),
        "{}"
    );
    // One that another process is writing is refused, naming it.
    let _held = FolderLock::acquire(&b, "trueneg finetune").unwrap();
    let e = claim(&b).unwrap_err().to_string();
    assert!(e.contains("trueneg finetune"), "{e}");
}

#[test]
fn finetune_and_evaluate_refuse_a_device_this_build_lacks_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for args in [
        vec![
            "finetune", "--task", "rte", "--model", "nowhere", "--device", "tpu:0",
        ],
        vec!["evaluate", "--model", "nowhere", "--device", "tpu:0"],
    ] {
        let mut c = common::bin();
        c.args(&args)
            .arg("--data")
            .arg(common::data("glue/RTE"))
            .arg("--out")
            .arg(&out);
        let e = common::fails(c.output().unwrap());
        assert!(e.contains("--device") && e.contains("tpu:0"), "{e}");
        assert!(!out.exists(), "nothing written: {args:?}");
    }
}

#[test]
fn plots_refuse_a_folder_and_leave_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let series = [trueneg::plot::Series {
        name: "x".into(),
        points: vec![(1.0, 0.0), (2.0, 0.0)],
        group: None,
        colour: None,
    }];
    let e = trueneg::plot::line_plot(dir.path(), "t", "step", "y", &series, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let e = trueneg::io::write_atomic(dir.path(), b"x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_run_killed_while_writing_its_first_checkpoint_is_retried_by_the_same_command() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // What a kill during the first checkpoint's write leaves: the checkpoint as a hidden
    // temporary folder, no metrics line yet (the retry before this fix removed the run files
    // but kept the checkpoints folder, and every later retry was refused).
    let left = run.join("checkpoints").join(".step-00000003.tmp");
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("model.safetensors"), [0u8; 16]).unwrap();
    std::fs::write(run.join("metrics.jsonl"), "").unwrap();
    // The folder's record of its maker, which the killed run wrote before anything else.
    trueneg::io::outputs::set_owner(&run, "trueneg pretrain").unwrap();
    ok(pretrain_cmd(&run, &["train.steps=3"]).output().unwrap());
    assert!(run.join("checkpoints").join("step-00000003").is_dir());
    assert!(!left.exists());
}
