//! The BERT encoder forward pass on packed sequences, for [`super::MiniLmEmbedder`].
//!
//! Why not candle's `BertModel`: it runs a padded `(batch, longest, hidden)` tensor, so a
//! batch mixing a 200-token chunk with 5-token entity names spends most of its FLOPs on
//! padding; it splits every GEMM over rayon threads even when the callers already keep every
//! core busy; and its GELU calls a scalar libm `erf`. Here the tokens of all texts are
//! concatenated into one `(tokens, hidden)` matrix: every dense layer is one large GEMM with
//! no padding, only attention looks at sequence boundaries (no mask is needed), and the
//! texts of a call are split over `threads` scoped threads that each run single-threaded
//! GEMMs, so no thread ever waits on another mid-pass. The GEMMs are candle's own library
//! (`gemm`), so [`sgemm_gflops`] measures the ceiling this pass is held to.

use std::ops::Range;

use candle_nn::VarBuilder;
use candle_transformers::models::bert::{Config, HiddenAct};
use gemm::Parallelism;

use crate::error::{Error, Result};

/// A dense layer `y = x · Wᵀ + b`, the weight in PyTorch's `(out, in)` layout.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value fused into one `(3 hidden, hidden)` projection: one GEMM, not three.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

pub struct Encoder {
    hidden: usize,
    heads: usize,
    intermediate: usize,
    eps: f32,
    activation: HiddenAct,
    max_positions: usize,
    vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Row 0 of the token-type table: single-text inputs only ever use type 0.
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

impl Encoder {
    /// Reads the weights `config` describes; checkpoints saved from `BertForX` nest them under
    /// `bert.`, which is looked for too.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Encoder> {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        if config.num_attention_heads == 0 || h % config.num_attention_heads != 0 {
            return Err(Error::Config(format!(
                "minilm: hidden size {h} does not split into {} attention heads",
                config.num_attention_heads
            )));
        }
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") { vb } else { vb.pp("bert") };
        let get = |shape: &[usize], name: &str| -> candle_core::Result<Vec<f32>> {
            vb.get(shape, name)?.flatten_all()?.to_vec1::<f32>()
        };
        let linear = |inputs: usize, outputs: usize, name: &str| -> candle_core::Result<Linear> {
            Ok(Linear {
                weight: get(&[outputs, inputs], &format!("{name}.weight"))?,
                bias: get(&[outputs], &format!("{name}.bias"))?,
                inputs,
                outputs,
            })
        };
        let norm = |name: &str| -> candle_core::Result<Norm> {
            Ok(Norm { gamma: get(&[h], &format!("{name}.weight"))?, beta: get(&[h], &format!("{name}.bias"))? })
        };
        let load = || -> candle_core::Result<Encoder> {
            let mut layers = Vec::with_capacity(config.num_hidden_layers);
            for l in 0..config.num_hidden_layers {
                let p = format!("encoder.layer.{l}");
                let (q, k, v) = (
                    linear(h, h, &format!("{p}.attention.self.query"))?,
                    linear(h, h, &format!("{p}.attention.self.key"))?,
                    linear(h, h, &format!("{p}.attention.self.value"))?,
                );
                layers.push(Layer {
                    qkv: Linear {
                        weight: [q.weight, k.weight, v.weight].concat(),
                        bias: [q.bias, k.bias, v.bias].concat(),
                        inputs: h,
                        outputs: 3 * h,
                    },
                    attention_out: linear(h, h, &format!("{p}.attention.output.dense"))?,
                    attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                    up: linear(h, i, &format!("{p}.intermediate.dense"))?,
                    down: linear(i, h, &format!("{p}.output.dense"))?,
                    out_norm: norm(&format!("{p}.output.LayerNorm"))?,
                });
            }
            let mut token_type = get(&[config.type_vocab_size, h], "embeddings.token_type_embeddings.weight")?;
            token_type.truncate(h);
            Ok(Encoder {
                hidden: h,
                heads: config.num_attention_heads,
                intermediate: i,
                eps: config.layer_norm_eps as f32,
                activation: config.hidden_act,
                max_positions: config.max_position_embeddings,
                vocab: config.vocab_size,
                word: get(&[config.vocab_size, h], "embeddings.word_embeddings.weight")?,
                position: get(&[config.max_position_embeddings, h], "embeddings.position_embeddings.weight")?,
                token_type,
                embedding_norm: norm("embeddings.LayerNorm")?,
                layers,
            })
        };
        load().map_err(|e| Error::Config(format!("minilm: the weights do not match config.json: {e}")))
    }

    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// FLOPs of one forward pass over sequences of these lengths (multiply-adds count two):
    /// the dense layers per token plus attention's two `n × n × head` products per head.
    pub fn flops(&self, lengths: impl IntoIterator<Item = usize>) -> f64 {
        let (h, i) = (self.hidden as f64, self.intermediate as f64);
        let dense_per_token = 2.0 * (3.0 * h * h + h * h + 2.0 * h * i);
        let per_layer: f64 = lengths
            .into_iter()
            .map(|n| {
                let n = n as f64;
                n * dense_per_token + 2.0 * 2.0 * n * n * h
            })
            .sum();
        per_layer * self.layers.len() as f64
    }

    /// Mean-pooled (not yet normalised) last hidden states, one per sequence of word-piece
    /// ids, split over at most `threads` threads.
    pub fn pooled(&self, sequences: &[Vec<u32>], threads: usize) -> Result<Vec<Vec<f32>>> {
        for ids in sequences {
            if ids.is_empty() || ids.len() > self.max_positions {
                return Err(Error::Embed(format!(
                    "minilm: a sequence of {} word pieces is outside 1..={}",
                    ids.len(),
                    self.max_positions
                )));
            }
            if let Some(bad) = ids.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(Error::Embed(format!("minilm: token id {bad} is outside the vocabulary")));
            }
        }
        let parts = split_by_tokens(sequences, threads.max(1));
        if parts.len() <= 1 {
            // One text (a query) cannot be split by texts: its dense layers split their rows
            // over the threads instead, which is what keeps a query's latency down.
            let dense = if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None };
            return Ok(self.pooled_part(sequences, dense));
        }
        let pooled: Vec<Vec<Vec<f32>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = parts[1..]
                .iter()
                .map(|range| scope.spawn(move || self.pooled_part(&sequences[range.clone()], Parallelism::None)))
                .collect();
            let mut all = vec![self.pooled_part(&sequences[parts[0].clone()], Parallelism::None)];
            // A panic in a worker is a bug in this module, not bad input: re-raise it.
            all.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
            all
        });
        Ok(pooled.into_iter().flatten().collect())
    }

    /// The forward pass over `sequences` on this thread, its dense layers' GEMMs run with
    /// `dense` parallelism.
    fn pooled_part(&self, sequences: &[Vec<u32>], dense: Parallelism) -> Vec<Vec<f32>> {
        let h = self.hidden;
        let mut spans = Vec::with_capacity(sequences.len());
        let mut start = 0;
        for ids in sequences {
            spans.push(start..start + ids.len());
            start += ids.len();
        }
        let tokens = start;
        let mut x = vec![0f32; tokens * h];
        for (ids, span) in sequences.iter().zip(&spans) {
            for (position, &id) in ids.iter().enumerate() {
                let row = &mut x[(span.start + position) * h..][..h];
                let word = &self.word[id as usize * h..][..h];
                let pos = &self.position[position * h..][..h];
                for (((v, w), p), t) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                    *v = w + p + t;
                }
            }
        }
        layer_norm(&mut x, &self.embedding_norm, self.eps);

        let mut qkv = vec![0f32; tokens * 3 * h];
        let mut context = vec![0f32; tokens * h];
        let mut attended = vec![0f32; tokens * h];
        let mut up = vec![0f32; tokens * self.intermediate];
        let longest = sequences.iter().map(Vec::len).max().unwrap_or(0);
        let mut scores = vec![0f32; longest * longest];
        for layer in &self.layers {
            layer.qkv.forward(&x, tokens, &mut qkv, dense);
            self.attention(&qkv, &spans, &mut scores, &mut context);
            layer.attention_out.forward(&context, tokens, &mut attended, dense);
            add_in_place(&mut attended, &x);
            layer_norm(&mut attended, &layer.attention_norm, self.eps);
            layer.up.forward(&attended, tokens, &mut up, dense);
            activate(&mut up, self.activation);
            layer.down.forward(&up, tokens, &mut x, dense);
            add_in_place(&mut x, &attended);
            layer_norm(&mut x, &layer.out_norm, self.eps);
        }

        spans
            .iter()
            .map(|span| {
                let mut mean = vec![0f32; h];
                for row in x[span.start * h..span.end * h].chunks_exact(h) {
                    add_in_place(&mut mean, row);
                }
                let n = span.len() as f32;
                mean.iter_mut().for_each(|v| *v /= n);
                mean
            })
            .collect()
    }

    /// Scaled dot-product attention per sequence and head: `softmax(Q Kᵀ / √d) V`, read
    /// straight out of the fused `qkv` rows (strided GEMM operands, no copies) and written
    /// into the head's columns of `context`.
    fn attention(&self, qkv: &[f32], spans: &[Range<usize>], scores: &mut [f32], context: &mut [f32]) {
        let h = self.hidden;
        let d = h / self.heads;
        let row = 3 * h;
        let scale = 1.0 / (d as f32).sqrt();
        for span in spans {
            let n = span.len();
            let scores = &mut scores[..n * n];
            for head in 0..self.heads {
                let q = &qkv[span.start * row + head * d..];
                let k = &qkv[span.start * row + h + head * d..];
                let v = &qkv[span.start * row + 2 * h + head * d..];
                // scores (n × n) = Q (n × d, row stride 3h) · Kᵀ (d × n: K's rows as columns).
                // SAFETY: every operand's extent (rows × row stride, columns × column stride)
                // lies inside its slice: q, k and v start within `qkv` at the span's first row
                // and reach its last row's head columns; `scores` holds n × n.
                unsafe {
                    gemm::gemm(
                        n,
                        n,
                        d,
                        scores.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        q.as_ptr(),
                        1,
                        row as isize,
                        k.as_ptr(),
                        row as isize,
                        1,
                        0.0,
                        scale,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
                for r in scores.chunks_exact_mut(n) {
                    softmax(r);
                }
                let out = &mut context[span.start * h + head * d..];
                debug_assert!(out.len() >= (n - 1) * h + d && v.len() >= (n - 1) * row + d);
                // context rows (n × d, row stride h) = P (n × n) · V (n × d, row stride 3h).
                // SAFETY: as above; `out` starts at the span's first row of `context` and its
                // n rows of stride h end inside it.
                unsafe {
                    gemm::gemm(
                        n,
                        d,
                        n,
                        out.as_mut_ptr(),
                        1,
                        h as isize,
                        false,
                        scores.as_ptr(),
                        1,
                        n as isize,
                        v.as_ptr(),
                        1,
                        row as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
            }
        }
    }
}

impl Linear {
    /// `out (rows × outputs) = x (rows × inputs) · Wᵀ + b`.
    fn forward(&self, x: &[f32], rows: usize, out: &mut [f32], parallelism: Parallelism) {
        let out = &mut out[..rows * self.outputs];
        assert!(x.len() >= rows * self.inputs, "linear input shorter than its rows");
        for r in out.chunks_exact_mut(self.outputs) {
            r.copy_from_slice(&self.bias);
        }
        // SAFETY: x holds rows × inputs, the weight outputs × inputs (read transposed through
        // its strides), out rows × outputs; all contiguous row-major.
        unsafe {
            gemm::gemm(
                rows,
                self.outputs,
                self.inputs,
                out.as_mut_ptr(),
                1,
                self.outputs as isize,
                true,
                x.as_ptr(),
                1,
                self.inputs as isize,
                self.weight.as_ptr(),
                self.inputs as isize,
                1,
                1.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            );
        }
    }
}

/// GFLOP/s of one `n × n` by `n × n` f32 product through the same GEMM library and on
/// `threads` threads: the ceiling for a forward pass made of GEMMs. Best of `repeats` runs.
pub fn sgemm_gflops(n: usize, threads: usize, repeats: usize) -> f64 {
    let a: Vec<f32> = (0..n * n).map(|i| ((i % 97) as f32 - 48.0) / 97.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i % 89) as f32 - 44.0) / 89.0).collect();
    let mut c = vec![0f32; n * n];
    let parallelism = if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None };
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let start = std::time::Instant::now();
        // SAFETY: a, b and c each hold n × n contiguous row-major f32.
        unsafe {
            gemm::gemm(
                n,
                n,
                n,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                n as isize,
                b.as_ptr(),
                1,
                n as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            );
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    2.0 * (n as f64).powi(3) / best / 1e9
}

/// Contiguous ranges of `sequences`, at most `parts` of them, holding about equal numbers of
/// tokens (attention's quadratic term is small next to the dense layers at these lengths).
fn split_by_tokens(sequences: &[Vec<u32>], parts: usize) -> Vec<Range<usize>> {
    let total: usize = sequences.iter().map(Vec::len).sum();
    let share = total.div_ceil(parts.max(1)).max(1);
    let mut ranges = Vec::new();
    let (mut start, mut filled) = (0, 0);
    for (i, ids) in sequences.iter().enumerate() {
        filled += ids.len();
        if filled >= share && ranges.len() + 1 < parts {
            ranges.push(start..i + 1);
            start = i + 1;
            filled = 0;
        }
    }
    if start < sequences.len() {
        ranges.push(start..sequences.len());
    }
    ranges
}

fn add_in_place(acc: &mut [f32], x: &[f32]) {
    acc.iter_mut().zip(x).for_each(|(a, b)| *a += b);
}

fn layer_norm(x: &mut [f32], norm: &Norm, eps: f32) {
    let h = norm.gamma.len();
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

fn activate(x: &mut [f32], activation: HiddenAct) {
    match activation {
        HiddenAct::Gelu => x.iter_mut().for_each(|v| *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2))),
        HiddenAct::GeluApproximate => x.iter_mut().for_each(|v| {
            let u = 0.797_884_6 * (*v + 0.044_715 * *v * *v * *v);
            *v = 0.5 * *v * (1.0 + u.tanh());
        }),
        HiddenAct::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
    }
}

/// The error function to about 1e-7 (Abramowitz & Stegun 7.1.26), far inside what f32
/// activations resolve; one `exp` instead of libm's branchy `erff`.
fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * (-x * x).exp();
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf at 0, ±0.5, 1, 2, 3 (to 1e-6).
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (-0.5, -0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (3.0, 0.999_977_9),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {} not {want}", erf(x));
        }
    }

    #[test]
    fn token_split_is_contiguous_balanced_and_complete() {
        let seqs: Vec<Vec<u32>> = [10, 10, 10, 10, 40, 1].iter().map(|&n| vec![0; n]).collect();
        let parts = split_by_tokens(&seqs, 2);
        assert_eq!(parts, vec![0..5, 5..6]);
        assert_eq!(split_by_tokens(&seqs, 1), vec![0..6]);
        assert_eq!(split_by_tokens(&seqs[..1], 4), vec![0..1]);
        assert!(split_by_tokens(&[], 2).is_empty());
        let even: Vec<Vec<u32>> = (0..8).map(|_| vec![0; 5]).collect();
        assert_eq!(split_by_tokens(&even, 2), vec![0..4, 4..8]);
    }

    #[test]
    fn softmax_and_layer_norm_are_normalised() {
        let mut row = [1.0, 2.0, 3.0, 1000.0];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6 && row[3] > 0.99);
        let norm = Norm { gamma: vec![1.0; 4], beta: vec![0.0; 4] };
        let mut x = [1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, &norm, 1e-12);
        assert!(x.iter().sum::<f32>().abs() < 1e-5);
        assert!((x.iter().map(|v| v * v).sum::<f32>() / 4.0 - 1.0).abs() < 1e-4);
    }

    #[test]
    fn linear_matches_the_naive_product() {
        let layer = Linear { weight: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], bias: vec![0.5, -1.0], inputs: 3, outputs: 2 };
        let x = [1.0, 0.0, -1.0, 2.0, 1.0, 0.0];
        let mut out = [0.0; 4];
        layer.forward(&x, 2, &mut out, Parallelism::None);
        assert_eq!(out, [1.0 - 3.0 + 0.5, 4.0 - 6.0 - 1.0, 2.0 + 2.0 + 0.5, 8.0 + 5.0 - 1.0]);
    }
}
