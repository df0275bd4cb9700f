//! How close the bench step comes to the machine: the step's floating-point work counted from
//! its shapes, the rate the step achieves, and the machine's practical matrix-product rate
//! measured in the same process at the encoder's shapes (with the step's device and
//! precision), beside the CPU's name.
//!
//! The count is the matrix products' (2·m·k·n each; element-wise work is left out, as model
//! FLOPs utilisation counts it), forward ×3 for forward + backward: per token and layer the
//! Q, K, V and output projections (4·2·h²), the FFN (2·2·h·i) and attention's two products
//! (2·2·L·h); ELECTRA's embedding projection (2·e·h) where the embeddings are narrower; per
//! masked position the MLM head (2·h·e + 2·e·V; the bench decodes the masked positions only);
//! for ELECTRA also the generator (the same terms at its width, on every token) and the
//! discriminator's head (2·h² + 2·h per token).

use std::time::Instant;

use burn::prelude::*;
use burn::tensor::FloatDType;

use super::{BenchSpec, MASKED_PER_SEQ, SEQ, VOCAB, bench_model};
use crate::kernels::Products;
use crate::kernels::gemm::{View, product_new};
use crate::model::EncoderConfig;
use crate::model::precision::Precision;
use crate::train::config::ModelKind;

/// Forward FLOPs of one encoder over `tokens` tokens of sequences of `SEQ`.
fn encoder_flops(c: &EncoderConfig, tokens: f64) -> f64 {
    let (h, i, e) = (
        c.hidden_size as f64,
        c.intermediate_size as f64,
        c.embedding_size as f64,
    );
    let per_layer = 4.0 * 2.0 * h * h + 2.0 * 2.0 * h * i + 2.0 * 2.0 * SEQ as f64 * h;
    let projection = if c.embedding_size != c.hidden_size {
        2.0 * e * h
    } else {
        0.0
    };
    tokens * (per_layer * c.num_hidden_layers as f64 + projection)
}

/// Forward FLOPs of the masked-LM head (dense to the embedding width, tied decoder) on
/// `positions` positions.
fn mlm_head_flops(c: &EncoderConfig, positions: f64) -> f64 {
    let (h, e) = (c.hidden_size as f64, c.embedding_size as f64);
    positions * (2.0 * h * e + 2.0 * e * VOCAB as f64)
}

/// The bench step's GFLOP (forward + backward), counted from its shapes.
pub fn step_gflop(spec: &BenchSpec) -> f64 {
    let section = bench_model(spec);
    let tokens = (spec.batch * SEQ) as f64;
    let masked = (spec.batch * MASKED_PER_SEQ) as f64;
    let disc = section.encoder(VOCAB);
    let forward = match spec.model {
        ModelKind::Bert => encoder_flops(&disc, tokens) + mlm_head_flops(&disc, masked),
        ModelKind::Electra => {
            let generator = section.generator(VOCAB);
            let h = disc.hidden_size as f64;
            encoder_flops(&generator, tokens)
                + mlm_head_flops(&generator, masked)
                + encoder_flops(&disc, tokens)
                + tokens * (2.0 * h * h + 2.0 * h)
        }
    };
    3.0 * forward / 1e9
}

/// The device's matrix-product rate at the encoder's three shapes (tokens × hidden × FFN,
/// tokens × FFN × hidden, tokens × hidden × hidden) in the step's precision, timed once after
/// each timed step of the bench ([`MatmulProbe::rate`]), so that each step's rate is set
/// against the machine's of the same moment ([`paired_efficiency`]): a shared machine's speed
/// drifts by tens of percent within minutes. Where the step's bf16 is [`Precision::HostBf16`],
/// the products are those its linear layers run: our bf16 kernel's.
pub struct MatmulProbe {
    operands: Operands,
    flop: f64,
}

/// The three shapes' operands, made once: host buffers for our CPU kernels (with how they
/// multiply), or tensors on the device for burn's product.
enum Operands {
    Host(Products, Vec<HostPair>),
    Device(Vec<(Tensor<2>, Tensor<2>)>),
}

/// A host product's operands: `a` `[m, k]`, `b` `[k, n]`, row-major.
struct HostPair {
    a: Vec<f32>,
    b: Vec<f32>,
    mkn: [usize; 3],
}

impl MatmulProbe {
    /// The operands on `device` in `spec`'s precision, each product run once untimed.
    pub fn new(device: &Device, spec: &BenchSpec) -> Self {
        let c = bench_model(spec).encoder(VOCAB);
        let tokens = spec.batch * SEQ;
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let shapes = [[tokens, h, i], [tokens, i, h], [tokens, h, h]];
        let flop = shapes
            .iter()
            .map(|&[m, k, n]| 2.0 * (m * k * n) as f64)
            .sum();
        let operands = if spec.precision.on(device) == Precision::HostBf16 {
            let pairs = shapes.map(|[m, k, n]| HostPair {
                a: vec![1f32; m * k],
                b: vec![0.5f32; k * n],
                mkn: [m, k, n],
            });
            Operands::Host(Precision::HostBf16.products(), pairs.into())
        } else {
            let dtype = spec.precision.dtype();
            let pairs = shapes.map(|[m, k, n]| {
                let a = Tensor::<2>::ones([m, k], device).cast(dtype);
                let b = Tensor::<2>::ones([k, n], device)
                    .mul_scalar(0.5)
                    .cast(dtype);
                (a, b)
            });
            Operands::Device(pairs.into())
        };
        let probe = Self { operands, flop };
        probe.rate();
        probe
    }

    /// GFLOP/s of one pass over the three products, now.
    pub fn rate(&self) -> f64 {
        let start = Instant::now();
        match &self.operands {
            Operands::Host(products, pairs) => {
                for HostPair {
                    a,
                    b,
                    mkn: [m, k, n],
                } in pairs
                {
                    // SAFETY: the views cover their own buffers, which nothing else touches.
                    let y = unsafe {
                        product_new(
                            View::rows(a, 0, *m, *k, *k),
                            View::rows(b, 0, *k, *n, *n),
                            rayon::current_num_threads(),
                            *products,
                        )
                    };
                    std::hint::black_box(y);
                }
            }
            Operands::Device(pairs) => {
                for (a, b) in pairs {
                    // One element read back waits for the device; the same cost every pass.
                    let y = a.clone().matmul(b.clone());
                    let _: f32 = y
                        .slice([0..1, 0..1])
                        .cast(FloatDType::F32)
                        .into_scalar::<f32>();
                }
            }
        }
        self.flop / start.elapsed().as_secs_f64() / 1e9
    }
}

/// How the steps compare with the machine: the median over the timed steps of each step's
/// rate (`gflop` in `step_ms[i]`) over the product rate timed right after it
/// (`probe_gflop_per_s[i]`), so that a drift of the machine's speed cancels. `None` without a
/// timed step.
pub fn paired_efficiency(gflop: f64, step_ms: &[f64], probe_gflop_per_s: &[f64]) -> Option<f64> {
    assert_eq!(step_ms.len(), probe_gflop_per_s.len(), "a probe per step");
    let ratios: Vec<f64> = step_ms
        .iter()
        .zip(probe_gflop_per_s)
        .map(|(ms, probe)| gflop / (ms / 1e3) / probe)
        .collect();
    (!ratios.is_empty()).then(|| super::stats::median(&ratios))
}

/// The products' rates of the forward and backward phases, GFLOP/s: a third of the step's
/// `gflop` in the forward (+ loss) phase's `forward_ms`, two thirds in the backward's
/// `backward_ms` (the count is the forward's times three, [`step_gflop`]). Where the two differ,
/// the slower phase is where the step loses against its products.
pub fn phase_rates(gflop: f64, forward_ms: f64, backward_ms: f64) -> [f64; 2] {
    [
        gflop / 3.0 / (forward_ms / 1e3),
        2.0 * gflop / 3.0 / (backward_ms / 1e3),
    ]
}

/// The CPU's name and `/proc/cpuinfo` family / model ("AMD EPYC 9R14 (family 25 model
/// 17)"), when the file is there.
pub fn cpu_name() -> Option<String> {
    let text = crate::io::read::read_text(std::path::Path::new("/proc/cpuinfo"), 1 << 24).ok()?;
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let name = field("model name")?;
    Some(match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!("{name} (family {f} model {m})"),
        _ => name,
    })
}
