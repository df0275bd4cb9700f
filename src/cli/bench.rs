//! `trueneg bench`: the training step's benchmark beside `torch_bench.py` (CPU and GPU).

use super::from_name;

#[derive(clap::Args)]
pub struct Args {
    /// Timed steps.
    #[arg(long, default_value_t = 20, value_parser = super::at_least(1))]
    steps: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// `bert` (torch_bench.py's step) or `electra` (torch_electra_bench.py's: generator +
    /// discriminator, loss L_G + 50·L_D).
    #[arg(long, default_value = "bert", value_parser = parse_model)]
    model: trueneg::train::config::ModelKind,
    /// The loss, an `objective.kind` of the masked-LM step: `sr` (BERT's default: MLM +
    /// word-level SR), `baseline` (MLM only; ELECTRA's default), or another (Hard Correction
    /// uses a synthetic WordNet-sized table). A comma-separated list interleaves the objectives'
    /// steps and prints each one's ratio to the first.
    #[arg(long, conflicts_with = "hc")]
    objective: Option<String>,
    /// Hard Correction (`--objective hc`; torch_electra_bench.py's `--hc`).
    #[arg(long)]
    hc: bool,
    /// cpu; cuda (feature `cuda`); libtorch or libtorch-cuda (feature `tch`).
    #[arg(long, default_value = "cpu")]
    device: trueneg::device::DeviceName,
    /// Encoder layers (the ELECTRA-Small-sized GPU variant: 12).
    #[arg(long, default_value_t = 4, value_parser = super::at_least(1))]
    layers: usize,
    /// Sequences of 128 tokens per step (the ELECTRA-Small-sized GPU variant: 128).
    #[arg(long, default_value_t = 16, value_parser = super::at_least(1))]
    batch: usize,
    /// f32, or bf16 mixed precision (torch_bench.py's `--amp bf16`).
    #[arg(long, default_value = "f32", value_parser = super::precision)]
    precision: trueneg::model::Precision,
    /// AdamW implementation: auto (multi-tensor on GPUs), on, off.
    #[arg(long, default_value = "auto", value_parser = parse_multi_tensor)]
    multi_tensor: trueneg::train::optimizer::MultiTensor,
    /// Wait for the device after each phase (true phase times on GPUs).
    #[arg(long)]
    sync_phases: bool,
    /// Record the step as a CUDA graph after the warm-up and replay it (`libtorch-cuda`).
    #[arg(long)]
    cuda_graph: bool,
    /// Count the LibTorch operations (on a GPU: kernel launches) of the first timed step, by
    /// name (`libtorch` or `libtorch-cuda`).
    #[arg(long)]
    count_ops: bool,
    /// `fused`: our fused CPU kernels and LibTorch's single calls where they serve; `composed`:
    /// burn's composed operations everywhere (what those bring).
    #[arg(long, default_value = "fused", value_parser = ["fused", "composed"])]
    kernels: String,
    /// Times a variant of the code against the code as built, in one process: the objective
    /// runs twice (same initial weights), step by step in turn, the second time with
    /// `kernels::trial::on()` set, which code under test reads; prints their paired ratio. Code
    /// that reads nothing of it gives the two the same work: the ratio's spread is the
    /// measurement's noise.
    #[arg(long, conflicts_with = "cuda_graph")]
    trial: bool,
}

fn parse_model(s: &str) -> Result<trueneg::train::config::ModelKind, String> {
    from_name(s, "bert or electra")
}

fn parse_multi_tensor(s: &str) -> Result<trueneg::train::optimizer::MultiTensor, String> {
    from_name(s, "auto, on or off")
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<trueneg::frame::Plan> {
        Ok(trueneg::frame::Plan::new("bench"))
    }

    fn run(self: Box<Self>, _: &trueneg::frame::Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self)
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    let Args {
        steps,
        warmup,
        model,
        objective,
        hc,
        device,
        layers,
        batch,
        precision,
        multi_tensor,
        sync_phases,
        cuda_graph,
        count_ops,
        kernels,
        trial,
    } = a;
    if layers == 0 || batch == 0 {
        anyhow::bail!("--layers and --batch must be > 0");
    }
    if count_ops && !(trueneg::kernels::op_count::available() && device.kind.is_libtorch()) {
        anyhow::bail!(
            "--count-ops counts LibTorch's operations: it needs a `tch` build and --device libtorch or libtorch-cuda"
        );
    }
    trueneg::kernels::set_composed(kernels == "composed");
    let objective = match (objective, hc, model) {
        (Some(o), _, _) => o,
        (None, true, _) => "hc".to_string(),
        (None, false, trueneg::train::config::ModelKind::Bert) => "sr".to_string(),
        (None, false, trueneg::train::config::ModelKind::Electra) => "baseline".to_string(),
    };
    let backend = device;
    let precision = precision.resolved(backend);
    let spec = trueneg::bench::BenchSpec {
        model,
        layers,
        batch,
        precision,
        multi_tensor,
        sync_phases,
        cuda_graph,
        count_ops,
        trial,
    };
    let kinds = objective
        .split(',')
        .map(|o| {
            from_name::<trueneg::objective::ObjectiveKind>(
                o,
                &trueneg::objective::ObjectiveKind::names(),
            )
            .map_err(|e| anyhow::anyhow!("--objective {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // With --trial, the bench's second runner steps the one objective again (`run_bench`).
    let trial_name = format!("{}+trial", objective.trim());
    let mut names: Vec<&str> = objective.split(',').map(str::trim).collect();
    if trial {
        names.push(&trial_name);
    }
    let device = trueneg::device::open(&backend)?.autodiff();
    println!(
        "# trueneg bench: model={model:?} device={backend} threads={} layers={layers} batch={batch}x{} masked={} precision={precision:?} kernels={kernels} objective={objective} trial={trial} cuda_graph={cuda_graph}",
        rayon::current_num_threads(),
        trueneg::bench::SEQ,
        batch * trueneg::bench::MASKED_PER_SEQ,
    );
    let reports = trueneg::bench::run_bench(
        &device,
        &spec,
        warmup,
        steps,
        &kinds,
        |j, step, loss, ms, [f, b, o]| {
            let tag = if step < warmup { "warmup" } else { "step" };
            println!(
                "{tag} {step:4} {} loss={loss:.8} ms={ms:.1} (forward {f:.0}, backward {b:.0}, optimizer {o:.0})",
                names[j]
            );
        },
    )?;
    print_summary(&names, &reports, &device);
    // A GPU's phases are the host's queueing unless each is waited for.
    let true_phases = !backend.kind.is_gpu() || spec.sync_phases;
    print_efficiency(&spec, &reports[0], &backend.to_string(), true_phases);
    Ok(())
}

/// The first objective's step against the machine: its GFLOP counted from the shapes, the
/// rate at the median step, the device's matrix-product rate at the encoder's shapes timed
/// after each step (the median), the steps' median ratio to it (`bench::efficiency`), and the
/// CPU's name; `scripts/torch_product_rates.py` gives PyTorch's rate on the same shapes. Where
/// the phases' times are true (`true_phases`), each phase's products' rate as well.
fn print_efficiency(
    spec: &trueneg::bench::BenchSpec,
    report: &trueneg::bench::BenchReport,
    backend: &str,
    true_phases: bool,
) {
    use trueneg::bench::efficiency::{cpu_name, paired_efficiency, phase_rates, step_gflop};
    let gflop = step_gflop(spec);
    let achieved = gflop / (report.median_ms / 1e3);
    let matmul = trueneg::bench::median(&report.probe_gflop_per_s);
    let Some(efficiency) = paired_efficiency(gflop, &report.step_ms, &report.probe_gflop_per_s)
    else {
        return;
    };
    let cpu = cpu_name().unwrap_or_else(|| "unknown CPU".into());
    println!(
        "# {gflop:.1} GFLOP per step (matrix products, from the shapes): {achieved:.1} GFLOP/s at the median step; the device's products at the encoder's shapes, timed after each step: {matmul:.1} GFLOP/s; each step's rate over the products' beside it: {:.0} % (median); {backend} on {cpu}, {} threads",
        100.0 * efficiency,
        rayon::current_num_threads()
    );
    println!("gflop_per_step={gflop:.3}");
    println!("gflop_per_s={achieved:.2}");
    println!("matmul_gflop_per_s={matmul:.2}");
    println!("efficiency={efficiency:.4}");
    if true_phases {
        let [f, b, _] = report.phase_ms;
        let [forward, backward] = phase_rates(gflop, f, b);
        println!(
            "# by phase (mean times): forward + loss {forward:.1} GFLOP/s (a third of the products in {f:.1} ms), backward {backward:.1} GFLOP/s (two thirds in {b:.1} ms)"
        );
        println!("forward_gflop_per_s={forward:.2}");
        println!("backward_gflop_per_s={backward:.2}");
    }
    if let Some(o) = trueneg::bench::occupancy::Occupancy::median(&report.occupancy) {
        println!(
            "# the step's threads (median over the steps): {:.1} % on a CPU, {:.1} % waiting for one the machine gave elsewhere, {:.1} % idle",
            100.0 * o.on_cpu,
            100.0 * o.waiting,
            100.0 * o.idle
        );
        println!("threads_on_cpu={:.4}", o.on_cpu);
        println!("threads_waiting={:.4}", o.waiting);
        println!("threads_idle={:.4}", o.idle);
    }
}

/// What the timed steps came to: each objective's phases and operations, the memory peaks,
/// and `ms_per_step=` (with several objectives, each one's ratios to the first).
fn print_summary(
    names: &[&str],
    reports: &[trueneg::bench::BenchReport],
    device: &burn::prelude::Device,
) {
    for (name, r) in names.iter().zip(reports) {
        let [f, b, o] = r.phase_ms;
        println!("# {name}: mean ms forward+loss {f:.1}, backward {b:.1}, optimizer {o:.1}");
    }
    for (name, r) in names.iter().zip(reports) {
        if let Some(ops) = &r.ops {
            print_ops(name, ops);
        }
    }
    if let Some((allocated, reserved)) = trueneg::kernels::cuda_graph::memory_peaks(device, false) {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        println!("# GPU memory reserved at the peak {:.0} MiB", mib(reserved));
        println!("peak_gpu_mib={:.0}", mib(allocated));
    }
    if let Some(kb) = trueneg::bench::peak_rss_kb() {
        println!("# peak RSS {:.0} MiB", kb as f64 / 1024.0);
    }
    if reports.len() == 1 {
        println!("ms_per_step={:.3}", reports[0].median_ms);
    } else {
        for (name, r) in names.iter().zip(reports) {
            println!(
                "ms_per_step[{name}]={:.3} ratio_to_{}={:.4} paired_ratio={:.4}",
                r.median_ms,
                names[0],
                r.median_ms / reports[0].median_ms,
                trueneg::bench::paired_ratio(r, &reports[0])
            );
        }
    }
}

/// One step's operations: how many launch a kernel (casts among them), how many do not, the
/// most frequent, and `ops_per_step=` for scripts.
fn print_ops(name: &str, ops: &trueneg::kernels::op_count::OpCounts) {
    use trueneg::kernels::op_count::CAST;
    let top: Vec<String> = ops
        .by_name
        .iter()
        .filter(|(n, _)| ops.launches(n))
        .take(12)
        .map(|(n, c)| format!("{} {c}", n.trim_start_matches("aten::")))
        .collect();
    println!(
        "# {name}: {} calls into LibTorch per step; {} operations launch a kernel ({} of them dtype casts), {} launch none (views, allocations); most frequent: {}",
        ops.calls,
        ops.launching(),
        ops.of(CAST),
        ops.without_kernel(),
        top.join(", ")
    );
    println!("ops_per_step[{name}]={}", ops.launching());
    println!("calls_per_step[{name}]={}", ops.calls);
    if std::env::var_os("TRUENEG_OPS_ALL").is_some() {
        for (n, c) in &ops.by_name {
            let kind = if ops.launches(n) { "kernel" } else { "none" };
            println!("# op {kind} {n} {c}");
        }
    }
}
