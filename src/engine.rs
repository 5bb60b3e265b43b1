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

fn load_policies(dir: &Path, config_file: Option<&Path>) -> Result<HashMap<String, Arc<Settings>>> {
    let mut policies = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
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
