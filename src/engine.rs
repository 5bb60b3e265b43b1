//! The long-lived state a CLI command or the daemon works with: settings, the knowledge base
//! behind a readers-writer lock (queries read a consistent snapshot; writes are exclusive),
//! the ingest pipeline, the controller, and the named policies.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::RwLock;

use crate::config::Settings;
use crate::control::{Controller, QueryRequest, QueryResponse};
use crate::error::{Error, Result};
use crate::ingest::Pipeline;
use crate::kb::Kb;
use crate::llm::LanguageModel;
use crate::net::Remote;

pub struct Engine {
    pub settings: Arc<Settings>,
    pub kb: RwLock<Kb>,
    pub pipeline: Pipeline,
    pub controller: Controller,
    pub llm: Option<Arc<dyn LanguageModel>>,
    policies: HashMap<String, Arc<Settings>>,
}

impl Engine {
    /// Opens everything `settings` describes. `config_file` is the user's file, re-read when
    /// layering policies so that a policy sits between it and the environment.
    pub fn open(settings: Settings, config_file: Option<&Path>) -> Result<Engine> {
        let settings = Arc::new(settings);
        // The one owner of remote model I/O for everything this engine calls.
        let remote = Remote::new();
        let embedder = crate::embed::from_settings(&settings.embed, &remote)?;
        let llm = crate::llm::from_settings(&settings.llm, &remote)?;
        let kb = Kb::open(settings.clone(), embedder.clone())?;
        let pipeline = Pipeline::from_settings(&settings, embedder, llm.clone(), &remote)?;
        let controller = Controller::from_settings(&settings, llm.clone())?;
        let policies = load_policies(&settings.policy.policies_dir, config_file)?;
        // The controller's roles come from the base settings: a policy cannot bring a model.
        if llm.is_none()
            && let Some((name, _)) = policies.iter().find(|(_, p)| p.retrieve.sufficiency_judge == crate::config::SufficiencyJudge::Llm)
        {
            return Err(Error::Config(format!(
                "policy `{name}` sets retrieve.sufficiency_judge = \"llm\", but no [llm] provider is configured (llm.provider = \"embedded\")"
            )));
        }
        if !settings.policy.default.is_empty() && !policies.contains_key(&settings.policy.default) {
            return Err(Error::Config(format!("policy.default `{}` is not in {}", settings.policy.default, settings.policy.policies_dir.display())));
        }
        Ok(Engine { settings, kb: RwLock::new(kb), pipeline, controller, llm, policies })
    }

    pub fn policy_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.policies.keys().cloned().collect();
        names.sort();
        names
    }

    /// The settings in force for a request naming `policy` (or the default policy).
    pub fn settings_for(&self, policy: Option<&str>) -> Result<Arc<Settings>> {
        let name = policy.or(Some(self.settings.policy.default.as_str()).filter(|s| !s.is_empty()));
        match name {
            None => Ok(self.settings.clone()),
            Some(name) => self.policies.get(name).cloned().ok_or_else(|| {
                Error::Invalid(format!("unknown policy `{name}` (known: {})", self.policy_names().join(", ")))
            }),
        }
    }

    pub async fn query(&self, request: &QueryRequest) -> Result<QueryResponse> {
        if request.question.trim().is_empty() {
            return Err(Error::Invalid("question is empty".into()));
        }
        let settings = self.settings_for(request.policy.as_deref())?;
        let kb = self.kb.read().await;
        Ok(self.controller.run(&kb, &settings, request).await)
    }
}

/// The policies shipped in `policies/`, for when no policies directory is found.
const EMBEDDED_POLICIES: &[(&str, &str)] = &[
    ("balanced", include_str!("../policies/balanced.toml")),
    ("cheap", include_str!("../policies/cheap.toml")),
    ("strict", include_str!("../policies/strict.toml")),
];

/// Where the policies directory is: a relative `policy.policies_dir` is taken next to the
/// config file (not the working directory, which changes with where a command is run).
/// Without a config file, the default name means the embedded policies (`None`), and any
/// other relative name is the user's own, under the working directory.
fn policies_dir(dir: &Path, config_file: Option<&Path>) -> Option<PathBuf> {
    let default = Settings::defaults().policy.policies_dir;
    let resolved = match config_file.and_then(Path::parent) {
        _ if dir.is_absolute() => dir.to_path_buf(),
        Some(config_dir) => config_dir.join(dir),
        None if dir == default => return None,
        None => dir.to_path_buf(),
    };
    // The default name where the config file has no such directory: the embedded ones.
    (resolved.is_dir() || dir != default).then_some(resolved)
}

fn load_policies(dir: &Path, config_file: Option<&Path>) -> Result<HashMap<String, Arc<Settings>>> {
    let mut policies = HashMap::new();
    let Some(dir) = policies_dir(dir, config_file) else {
        for (name, toml) in EMBEDDED_POLICIES {
            let settings = Settings::load_with_policy_text(config_file, toml).map_err(|e| Error::Config(format!("embedded policy {name}: {e}")))?;
            policies.insert(name.to_string(), Arc::new(settings));
        }
        return Ok(policies);
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        // No policies directory is fine: requests may then name no policy.
        return Ok(policies);
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "toml")).collect();
    files.sort();
    for file in files {
        let name = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let settings = Settings::load_with_policy(config_file, Some(&file))
            .map_err(|e| Error::Config(format!("policy {}: {e}", file.display())))?;
        policies.insert(name, Arc::new(settings));
    }
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 17: `--policy cheap` failed outside the checkout ("known: " and nothing).
    #[test]
    fn policies_do_not_depend_on_the_working_directory() {
        let embedded = load_policies(Path::new("policies"), None).unwrap();
        let mut names: Vec<_> = embedded.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["balanced", "cheap", "strict"]);
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("a2rag.toml");
        std::fs::write(&config, "").unwrap();
        std::fs::create_dir(dir.path().join("policies")).unwrap();
        std::fs::write(dir.path().join("policies/mine.toml"), "[gate]\nthreshold = 0.11\n").unwrap();
        let next_to_config = load_policies(Path::new("policies"), Some(&config)).unwrap();
        assert_eq!(next_to_config.keys().collect::<Vec<_>>(), ["mine"]);
        assert_eq!(next_to_config["mine"].gate.threshold, 0.11);
        std::fs::remove_dir_all(dir.path().join("policies")).unwrap();
        assert_eq!(load_policies(Path::new("policies"), Some(&config)).unwrap().len(), 3, "embedded when the config has none beside it");
    }
}
