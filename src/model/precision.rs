//! Compute precision of the encoders: `f32`, or `bf16` mixed precision.
//!
//! burn has no autocast, so the casts are written where they belong, following the rules of
//! PyTorch's CUDA autocast:
//! - matrix products (every `Linear`, the attention scores `QKᵀ` and context `PV`, the MLM
//!   decoder) take bf16 operands — each f32 weight is cast on use, so the parameters, their
//!   gradients (the cast's backward casts them back) and the optimizer state stay f32 (on
//!   LibTorch devices the weights are slices of one cast of all the parameters per step where
//!   the optimizer keeps them in one flat buffer: `kernels::param_cast`);
//! - what runs after a product in the same block (the attention scaling, GELU, dropout) stays
//!   bf16, so the activations kept for the backward pass are half the size;
//! - softmax (attention and the MLM cross-entropy), LayerNorm and the residual sums run in f32:
//!   their inputs are cast up first, and the hidden states between layers are f32;
//! - the heads return f32 logits, so every loss and its reductions are f32.
//!
//! With `F32` every helper here is the plain f32 operation (no cast is inserted).

use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::FloatDType;
use serde::{Deserialize, Serialize};

use crate::kernels;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    Bf16,
    /// What `Bf16` is on our CPU kernels ([`Precision::on`]): every tensor stays f32, and the
    /// products (the linear layers' and attention's) round their operands to bf16 and sum in
    /// f32 — the products are where bf16 pays on a CPU (BENCHMARKS.md), the casts of the other
    /// operations would cost more than they save. With AVX-512 BF16 the products run
    /// `kernels::gemm_bf16`; without it the same arithmetic runs on the f32 kernels, a little
    /// slower than f32 (the rounded copies; BENCHMARKS.md). Not a config value.
    #[serde(skip)]
    HostBf16,
    /// `auto`, a config and flag value: bf16 where it pays and its accuracy was checked, f32
    /// elsewhere ([`Precision::resolved`] chooses, before a model is built).
    Auto,
}

impl Precision {
    /// What `auto` chooses on `device` (any other value is itself), said in the log: bf16 on
    /// a GPU; on our CPU kernels, bf16 where its products measure at least
    /// [`kernels::bf16_rate::PAYS_FROM`] × f32's on this CPU (Zen 4 and 5 with AVX-512 BF16;
    /// the bf16 step's loss and held-out accuracy against f32's: BENCHMARKS.md), f32 elsewhere:
    /// on CPUs without AVX-512 BF16, on Intel's without AMX (where `vdpbf16ps` runs at ~0.6×
    /// the f32 rate), and on LibTorch's CPU device.
    pub fn resolved(self, device: crate::device::DeviceName) -> Self {
        use crate::device::DeviceKind;
        if self != Precision::Auto {
            return self;
        }
        let (chosen, why) = match device.kind {
            DeviceKind::Cuda | DeviceKind::LibTorchCuda => (Precision::Bf16, "a GPU".to_string()),
            DeviceKind::Cpu => Self::on_this_cpu(kernels::bf16_rate::speedup()),
            DeviceKind::LibTorch => (Precision::F32, "LibTorch's CPU device".to_string()),
        };
        let name = if chosen == Precision::Bf16 {
            "bf16"
        } else {
            "f32"
        };
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| tracing::info!("precision auto: {name} ({why}, device {device})"));
        chosen
    }

    /// `auto`'s choice on our CPU kernels, given bf16's measured product rate over f32's
    /// (`None`: no AVX-512 BF16), and the reason it gives.
    pub fn on_this_cpu(speedup: Option<f64>) -> (Self, String) {
        let Some(s) = speedup else {
            return (Precision::F32, "this CPU has no AVX-512 BF16".into());
        };
        let measured = format!("bf16 products measured at {s:.2}x f32's on this CPU");
        if kernels::bf16_rate::pays(s) {
            (Precision::Bf16, measured)
        } else {
            let floor = kernels::bf16_rate::PAYS_FROM;
            (
                Precision::F32,
                format!("{measured}, under the {floor}x bf16 needs to pay"),
            )
        }
    }

    /// The precision a model built on `device` computes in: `Bf16` on our CPU kernels becomes
    /// [`Precision::HostBf16`]; anything else stays itself. Where bf16 is not faster than f32
    /// on this CPU (no AVX-512 BF16, or its products measured slower), a notice (once) says so.
    pub fn on(self, device: &Device) -> Self {
        assert!(
            self != Precision::Auto,
            "precision auto is resolved for its device before a model is built"
        );
        let host = kernels::fused(device, burn::tensor::DType::F32);
        if self != Precision::Bf16 || !host {
            return self;
        }
        static NOTICE: std::sync::Once = std::sync::Once::new();
        match kernels::bf16_rate::speedup() {
            None => NOTICE.call_once(|| {
                tracing::warn!(
                    "this CPU has no AVX-512 BF16: bf16 products round their operands and \
                     multiply in f32, no faster than --precision f32 here"
                )
            }),
            Some(s) if s < 1.0 => NOTICE.call_once(|| {
                tracing::warn!(
                    "bf16 products run at {s:.2}x the f32 rate on this CPU (AVX-512 BF16 without \
                     AMX): --precision f32 is faster here"
                )
            }),
            Some(_) => {}
        }
        Precision::HostBf16
    }

    /// The dtype matrix products run in.
    pub fn dtype(self) -> FloatDType {
        match self {
            Precision::F32 | Precision::HostBf16 | Precision::Auto => FloatDType::F32,
            Precision::Bf16 => FloatDType::BF16,
        }
    }

    /// How our CPU kernels multiply the linear layers' and attention's operands.
    pub fn products(self) -> kernels::gemm::Products {
        match self {
            Precision::HostBf16 => kernels::gemm::Products::Bf16,
            Precision::F32 | Precision::Bf16 | Precision::Auto => kernels::gemm::Products::F32,
        }
    }

    /// `x` in the compute dtype (no-op when it already is).
    pub fn compute<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        x.cast(self.dtype())
    }

    /// Parameter `w` in the compute dtype (no-op when it already is); on LibTorch devices a
    /// slice of one cast of all the parameters (`kernels::param_cast`) where it can be.
    pub fn param<const D: usize>(self, w: Tensor<D>) -> Tensor<D> {
        kernels::param_cast(w, self.dtype())
    }

    /// `x @ W + b` with bf16 operands under `Bf16` (result in the compute dtype).
    ///
    /// The leading dimensions are folded into rows first, so the product is one 2-D matrix
    /// product. burn's dispatch backend composes `Linear` as a batched product against the weight
    /// broadcast to every batch; its backward pass then computes one weight gradient per batch
    /// (`[batch, in, out]`) and sums them, where one `[in, rows] @ [rows, out]` product does.
    pub fn linear<const D: usize>(self, l: &Linear, x: Tensor<D>) -> Tensor<D> {
        self.affine(x, l.weight.val(), l.bias.as_ref().map(|b| b.val()))
    }

    /// `x @ w + b` for `w` `[in, out]`, as [`linear`](Self::linear) computes it.
    pub fn affine<const D: usize>(
        self,
        x: Tensor<D>,
        w: Tensor<2>,
        b: Option<Tensor<1>>,
    ) -> Tensor<D> {
        let mut dims = x.dims();
        let d_in = dims[D - 1];
        let rows = dims[..D - 1].iter().product::<usize>();
        let w = self.param(w);
        let x = self.compute(x).reshape([rows, d_in]);
        let y = kernels::linear(x, w, b, self.products());
        dims[D - 1] = y.dims()[1];
        y.reshape(dims)
    }

    /// `a @ b` with operands in the compute dtype.
    pub fn matmul<const D: usize>(self, a: Tensor<D>, b: Tensor<D>) -> Tensor<D> {
        self.compute(a).matmul(self.compute(b))
    }
}

/// `x` in f32 (no-op when it already is).
pub fn full<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    x.cast(FloatDType::F32)
}
