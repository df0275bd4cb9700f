//! The matrix products of the CPU bench step (bench spec: 16 × 128 tokens, hidden 256, FFN
//! 1024, 304 masked positions, vocabulary 30522) in the layouts the `Linear` kernel uses, for
//! the examples that time them (`product_rates`, `bf16_product_rates`).

use trueneg::kernels::gemm::View;

/// `(name, m, k, n, a transposed, b transposed)`: `dst[m, n] = A[m, k] · B[k, n]`, where a
/// transposed operand is the transpose of a row-major matrix.
pub const SHAPES: [(&str, usize, usize, usize, bool, bool); 12] = [
    ("attention projection x·W", 2048, 256, 256, false, false),
    ("attention projection G·Wᵀ", 2048, 256, 256, false, true),
    ("attention projection xᵀ·G", 256, 2048, 256, true, false),
    ("FFN in x·W", 2048, 256, 1024, false, false),
    ("FFN in G·Wᵀ", 2048, 1024, 256, false, true),
    ("FFN in xᵀ·G", 256, 2048, 1024, true, false),
    ("FFN out x·W", 2048, 1024, 256, false, false),
    ("FFN out G·Wᵀ", 2048, 256, 1024, false, true),
    ("FFN out xᵀ·G", 1024, 2048, 256, true, false),
    ("MLM decoder x·Eᵀ", 304, 256, 30522, false, true),
    ("MLM decoder G·E", 304, 30522, 256, false, false),
    ("MLM decoder xᵀ·G", 256, 304, 30522, true, false),
];

/// A `rows × cols` operand over `data`: row-major, or the transpose of a row-major matrix.
pub fn operand(data: &[f32], rows: usize, cols: usize, transposed: bool) -> View {
    if transposed {
        View::rows(data, 0, cols, rows, rows).t()
    } else {
        View::rows(data, 0, rows, cols, cols)
    }
}
