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

/// The device's rate, in GFLOP/s, on the encoder's three product shapes (tokens × hidden ×
/// FFN, tokens × FFN × hidden, tokens × hidden × hidden) in the step's precision: for each,
/// the best of `repeats` products on warm operands, and the three together. Where the step's
/// bf16 is [`Precision::HostBf16`], the products are those its linear layers run: our bf16
/// kernel's.
pub fn matmul_gflop_per_s(device: &Device, spec: &BenchSpec, repeats: usize) -> f64 {
    let c = bench_model(spec).encoder(VOCAB);
    let tokens = spec.batch * SEQ;
    let (h, i) = (c.hidden_size, c.intermediate_size);
    let host_bf16 = spec.precision.on(device) == Precision::HostBf16;
    let (mut seconds, mut flop) = (0.0, 0.0);
    for (m, k, n) in [(tokens, h, i), (tokens, i, h), (tokens, h, h)] {
        seconds += if host_bf16 {
            host_seconds(m, k, n, repeats, Precision::HostBf16.products())
        } else {
            device_seconds(device, spec.precision.dtype(), [m, k, n], repeats)
        };
        flop += 2.0 * (m * k * n) as f64;
    }
    flop / seconds / 1e9
}

/// The best of `repeats` timings by `run`, after one untimed call (warm operands).
fn best_of(repeats: usize, run: impl Fn() -> f64) -> f64 {
    run();
    (0..repeats.max(1)).map(|_| run()).fold(f64::MAX, f64::min)
}

/// Seconds of one `[m, k] · [k, n]` product of burn's on `device` in `dtype`.
fn device_seconds(
    device: &Device,
    dtype: FloatDType,
    [m, k, n]: [usize; 3],
    repeats: usize,
) -> f64 {
    let a = Tensor::<2>::ones([m, k], device).cast(dtype);
    let b = Tensor::<2>::ones([k, n], device)
        .mul_scalar(0.5)
        .cast(dtype);
    // One element read back waits for the device; its cost is the same in every repeat.
    best_of(repeats, || {
        let start = Instant::now();
        let y = a.clone().matmul(b.clone());
        let _: f32 = y
            .slice([0..1, 0..1])
            .cast(FloatDType::F32)
            .into_scalar::<f32>();
        start.elapsed().as_secs_f64()
    })
}

/// Seconds of one `[m, k] · [k, n]` product of our CPU kernels' (`products`) on all of
/// rayon's threads.
fn host_seconds(m: usize, k: usize, n: usize, repeats: usize, products: Products) -> f64 {
    let (a, b) = (vec![1f32; m * k], vec![0.5f32; k * n]);
    best_of(repeats, || {
        let start = Instant::now();
        // SAFETY: the views cover their own buffers, which nothing else touches.
        let y = unsafe {
            product_new(
                View::rows(&a, 0, m, k, k),
                View::rows(&b, 0, k, n, n),
                rayon::current_num_threads(),
                products,
            )
        };
        std::hint::black_box(y);
        start.elapsed().as_secs_f64()
    })
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
