//! Data parallelism across processes (`crate::dist`): launcher variables read as torchrun,
//! srun and mpirun set them; with the `tch` feature (LibTorch's c10d and Gloo), two processes
//! of one replica each train exactly like one process with two host replicas (the same rows
//! and random draws per replica), rank 0 alone writes, and a rank killed with SIGKILL stops
//! the other with an error naming it instead of a hang.

use crate::common;

use std::collections::HashMap;

use trueneg::dist::World;

fn world(vars: &[(&str, &str)]) -> trueneg::Result<World> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    World::from_vars(|k| map.get(k).cloned())
}

#[test]
fn launcher_variables_give_the_world() {
    assert_eq!(world(&[]).unwrap(), World::single());
    let w = world(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "node7"),
        ("MASTER_PORT", "29501"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
    ])
    .unwrap();
    assert_eq!(
        (w.rank, w.size, w.local_rank, w.master_addr.as_str()),
        (3, 8, 1, "node7")
    );
    assert_eq!(
        (w.master_port, w.agent_store, w.launcher),
        (29501, true, "torchrun")
    );
    let s = world(&[
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "16"),
        ("SLURM_LOCALID", "1"),
    ])
    .unwrap();
    assert_eq!(
        (s.rank, s.size, s.local_rank, s.launcher),
        (5, 16, 1, "srun")
    );
    assert_eq!(
        (s.master_addr.as_str(), s.master_port, s.agent_store),
        ("127.0.0.1", 29500, false)
    );
    // A Slurm job on several nodes: task 0's host and a port from the job id, unless given.
    let nodes = [
        ("SLURM_PROCID", "9"),
        ("SLURM_NTASKS", "16"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_JOB_NODELIST", "gpu[07-08,11],cpu3"),
        ("SLURM_JOB_ID", "123456"),
    ];
    let s = world(&nodes).unwrap();
    assert_eq!((s.master_addr.as_str(), s.master_port), ("gpu07", 13456));
    let given = [
        nodes.as_slice(),
        &[("MASTER_ADDR", "h0"), ("MASTER_PORT", "29400")],
    ]
    .concat();
    let s = world(&given).unwrap();
    assert_eq!((s.master_addr.as_str(), s.master_port), ("h0", 29400));
    for (list, first) in [
        ("n1", "n1"),
        ("node[001-004]", "node001"),
        ("r[1-2]-n[3-4],x", "r1-n3"),
        ("a[5,7-9]b", "a5b"),
    ] {
        assert_eq!(
            trueneg::dist::world::first_host(list).as_deref(),
            Some(first)
        );
    }
    let m = world(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
    ])
    .unwrap();
    assert_eq!((m.rank, m.size, m.launcher), (1, 2, "mpirun"));
    let e = world(&[("RANK", "2"), ("WORLD_SIZE", "2")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 2 of a world of 2"), "{e}");
    let e = world(&[("RANK", "x"), ("WORLD_SIZE", "2")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("RANK = \"x\" is not a number"), "{e}");
    let e = world(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "port")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("MASTER_PORT"), "{e}");
}

#[test]
fn each_process_takes_its_share_of_the_cores() {
    let w = world(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_WORLD_SIZE", "2"),
    ])
    .unwrap();
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(w.threads(16, env(&[("LOCAL_WORLD_SIZE", "2")])), Some(8));
    assert_eq!(w.threads(16, env(&[])), Some(4));
    assert_eq!(w.threads(16, env(&[("SLURM_CPUS_PER_TASK", "6")])), Some(6));
    assert_eq!(w.threads(16, env(&[("RAYON_NUM_THREADS", "3")])), None);
    assert_eq!(w.threads(1, env(&[])), Some(1));
    assert_eq!(World::single().threads(16, env(&[])), None);
}

#[test]
fn a_world_of_one_joins_a_group_only_under_torchrun_with_the_engine() {
    let port = common::free_port().to_string();
    let timeout = std::time::Duration::from_secs(20);
    let join = |vars: &[(&str, &str)]| {
        trueneg::dist::Group::join(&world(vars).unwrap(), timeout)
            .unwrap()
            .is_some()
    };
    // Slurm and MPI single-task jobs stay a world of one, with or without the engine.
    assert!(!join(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")]));
    assert!(!join(&[("PMI_RANK", "0"), ("PMI_SIZE", "1")]));
    assert!(!join(&[]));
    let torchrun = [
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", port.as_str()),
    ];
    assert_eq!(join(&torchrun), cfg!(feature = "tch"));
}

#[cfg(not(feature = "tch"))]
#[test]
fn a_launcher_without_the_engine_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::pretrain_cmd(&dir.path().join("r"), &[])
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .output()
        .unwrap();
    let e = common::fails(out);
    assert!(e.contains("--features tch"), "{e}");
    assert!(!dir.path().join("r").exists());
}

#[cfg(feature = "tch")]
mod processes {
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::common::{free_port, metrics, ok, pretrain_cmd, resume_cmd};

    /// ELECTRA with dropout and Hard Correction: every random draw and count is per replica.
    const SETS: [&str; 3] = [
        "objective.kind=hc",
        "train.steps=4",
        "train.checkpoint_every=2",
    ];

    /// `c` as rank `r` of `size` processes on this host, its store at `port`.
    fn as_rank(c: &mut Command, r: usize, size: usize, port: u16) {
        c.env("RANK", r.to_string())
            .env("WORLD_SIZE", size.to_string())
            .env("LOCAL_RANK", r.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env("RAYON_NUM_THREADS", "1");
    }

    fn rank(run: &Path, r: usize, size: usize, port: u16, extra: &[&str]) -> Command {
        let sets: Vec<&str> = SETS.iter().chain(extra).copied().collect();
        let mut c = pretrain_cmd(run, &sets);
        as_rank(&mut c, r, size, port);
        c
    }

    fn spawn(mut c: Command) -> Child {
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn close(a: f64, b: f64, what: &str) {
        super::common::close_to(a, b, 2e-5, what);
    }

    #[test]
    fn two_processes_train_like_two_replicas_in_one() {
        let dir = tempfile::tempdir().unwrap();
        let one: PathBuf = dir.path().join("replicas");
        ok(pretrain_cmd(&one, &SETS)
            .args(["--devices", "cpu,cpu"])
            .output()
            .unwrap());
        let two = dir.path().join("ranks");
        let port = free_port();
        let r1 = spawn(rank(&two, 1, 2, port, &[]));
        let r0 = ok(rank(&two, 0, 2, port, &[]).output().unwrap());
        ok(r1.wait_with_output().unwrap());
        assert!(r0.contains("pre-trained 4 steps"), "{r0}");
        let (a, b) = (metrics(&one), metrics(&two));
        assert_eq!(a.len(), 4);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            let at = format!("step {}", x.step);
            close(x.loss, y.loss, &format!("{at} loss"));
            close(x.mlm_loss(), y.mlm_loss(), &format!("{at} mlm"));
            close(x.grad_norm, y.grad_norm, &format!("{at} grad norm"));
            assert_eq!(
                (x.masked, x.value("mismatched"), x.value("corrected")),
                (y.masked, y.value("mismatched"), y.value("corrected")),
                "{at}"
            );
        }
        // Rank 0 wrote the run; the checkpoints are those of a one-process run.
        assert!(two.join("checkpoints").is_dir() && two.join("loss.png").is_file());
        // A run of two ranks resumes in one process (any world size).
        ok(resume_cmd(&two)
            .args(["--set", "train.steps=6"])
            .output()
            .unwrap());
        let m = metrics(&two);
        assert_eq!(
            m.iter().map(|x| x.step).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
    }

    /// Runs a job of `size` ranks to its end, rank `r` running `command(r)` with the launcher's
    /// variables; rank 0's standard error.
    fn launch(size: usize, command: impl Fn(usize) -> Command) -> String {
        let port = free_port();
        let with_rank = |r: usize| {
            let mut c = command(r);
            as_rank(&mut c, r, size, port);
            c
        };
        let others: Vec<Child> = (1..size).map(|r| spawn(with_rank(r))).collect();
        let out = with_rank(0).output().unwrap();
        for o in others {
            ok(o.wait_with_output().unwrap());
        }
        ok(out.clone());
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A job of `size` ranks training `run` (with `env`); rank 0's standard error.
    fn job(run: &Path, size: usize, extra: &[&str], env: &[(&str, &str)]) -> String {
        launch(size, |r| {
            let mut c = rank(run, r, size, 0, extra);
            c.envs(env.iter().copied());
            c
        })
    }

    /// Every metrics line of a run but its timing, as JSON values.
    fn values(run: &Path) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        text.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("tokens_per_s");
                v
            })
            .collect()
    }

    #[test]
    fn the_all_reduce_overlaps_the_backward_pass_and_sums_bit_for_bit() {
        // LibTorch's CPU device: its gradients are summed where they are, the encoder layers'
        // while the backward pass runs; 3 ranks, so that Gloo's sums are not just a + b.
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("overlap"), dir.path().join("after"));
        let sets = [
            "train.device=libtorch",
            "train.steps=3",
            "data.batch_size=6",
        ];
        let told = job(&a, 3, &sets, &[("TRUENEG_OVERLAP", "1")]);
        job(&b, 3, &sets, &[("TRUENEG_OVERLAP", "0")]);
        assert!(
            told.contains("all-reduce overlapped with the backward pass: 4 of 4 buckets"),
            "{told}"
        );
        let (x, y) = (values(&a), values(&b));
        assert_eq!(x.len(), 3);
        assert_eq!(
            x, y,
            "the overlapped run differs from the one summed after backward"
        );
    }

    #[test]
    fn three_processes_train_like_one_and_resume_its_checkpoint() {
        // BERT without dropout, Hard Correction and both Soft Regularizations: no random draw
        // differs between ranks, so 3 ranks × 2 rows train like one process × 6 rows.
        let exact = [
            "model.kind=bert",
            "model.hidden_dropout_prob=0",
            "model.attention_probs_dropout_prob=0",
            "objective.kind=hc+sr",
            "objective.sr_sent_weight=0.5",
            "train.device=libtorch",
            "data.batch_size=6",
        ];
        let sets: Vec<&str> = SETS.iter().chain(&exact).copied().collect();
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("one");
        ok(pretrain_cmd(&one, &sets).output().unwrap());
        // The same run stopped at its step-2 checkpoint, then resumed by three processes.
        let three = dir.path().join("three");
        let mut first = sets.clone();
        first.push("train.steps=2");
        ok(pretrain_cmd(&three, &first).output().unwrap());
        launch(3, |_| {
            let mut c = resume_cmd(&three);
            c.args(["--set", "train.steps=4"])
                .env("TRUENEG_OVERLAP", "1");
            c
        });
        let (a, b) = (metrics(&one), metrics(&three));
        assert_eq!(a.len(), 4);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            let at = format!("step {}", x.step);
            close(x.loss, y.loss, &format!("{at} loss"));
            let sr = |m: &trueneg::train::pretrain::StepMetrics| m.value("sr_loss").unwrap();
            close(sr(x), sr(y), &format!("{at} sr"));
            close(x.grad_norm, y.grad_norm, &format!("{at} grad norm"));
            assert_eq!(
                (x.masked, x.value("mismatched")),
                (y.masked, y.value("mismatched")),
                "{at}"
            );
        }
    }

    /// Runs ranks 0 and 1 of a job of two (each rank's extra `--set`s and world size) and
    /// returns both one-line errors.
    fn two_failing(extra: [&[&str]; 2], sizes: [usize; 2]) -> [String; 2] {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("r");
        let port = free_port();
        let r1 = spawn(rank(&run, 1, sizes[1], port, extra[1]));
        let r0 = spawn(rank(&run, 0, sizes[0], port, extra[0]));
        [r0, r1].map(|c| {
            let out = c.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            assert!(!out.status.success(), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            err
        })
    }

    #[test]
    fn ranks_of_another_configuration_or_world_size_are_refused() {
        // A field differs: both ranks stop before training, naming the field and both values.
        let [e0, e1] = two_failing([&[], &["optimizer.lr=0.0007"]], [2, 2]);
        for e in [&e0, &e1] {
            assert!(e.contains("rank 1's run differs from rank 0's"), "{e}");
            assert!(e.contains("`[optimizer] lr = 0.0007`"), "{e}");
        }
        assert!(e0.starts_with("error: rank 0 of 2: "), "{e0}");
        // Launched for another world size: refused at the rendezvous, before Gloo connects.
        let [e0, e1] = two_failing([&[], &[]], [2, 3]);
        assert!(
            e0.contains("rank 1 was launched for a world of 3 processes, rank 0 for 2"),
            "{e0}"
        );
        assert!(
            e1.contains("rank 0 was launched for a world of 2 processes, rank 1 for 3"),
            "{e1}"
        );
    }

    /// Whether rank 0's store, up and waiting for rank 1, accepts a connection on 127.0.0.2
    /// (another address of this host: all of 127/8 is loopback) when MASTER_ADDR is 127.0.0.1.
    fn store_accepts_another_address(env: &[(&str, &str)]) -> std::io::Result<()> {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("r");
        let port = free_port();
        let mut c = rank(&run, 0, 2, port, &[]);
        c.envs(env.iter().copied());
        let mut r0 = spawn(c);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "no store");
            std::thread::sleep(Duration::from_millis(50));
        }
        let other = std::net::TcpStream::connect(("127.0.0.2", port));
        r0.kill().unwrap();
        r0.wait().unwrap();
        other.map(|_| ())
    }

    #[test]
    fn the_store_listens_on_master_addr_only() {
        // c10d's own server listens on every interface and would accept this.
        let e = store_accepts_another_address(&[])
            .expect_err("the store accepted a connection on another address");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        // Asked to, it listens on every interface (a MASTER_ADDR it cannot bind).
        store_accepts_another_address(&[("TRUENEG_STORE_BIND", "all")]).unwrap();
    }

    #[test]
    fn a_killed_rank_stops_the_other_with_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("r");
        let port = free_port();
        let long = ["train.steps=100000", "train.checkpoint_every=100000"];
        let mut r1 = spawn(rank(&run, 1, 2, port, &long));
        let r0 = spawn(rank(&run, 0, 2, port, &long));
        // Kill rank 1 once the job trains (rank 0 has written its first metrics line).
        let started = Instant::now();
        while !run.join("metrics.jsonl").is_file()
            || std::fs::metadata(run.join("metrics.jsonl")).unwrap().len() == 0
        {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the job never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        r1.kill().unwrap();
        r1.wait().unwrap();
        let killed = Instant::now();
        let out = r0.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(killed.elapsed() < Duration::from_secs(60), "{err}");
        assert!(err.contains("rank 0 of 2: "), "{err}");
        assert!(err.contains("rank 1 stopped or is unreachable"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
