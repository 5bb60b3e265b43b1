//! a2rag: adaptive agentic graph retrieval. See ARCHITECTURE.md for the map.

pub mod access;
pub mod bench;
pub mod config;
pub mod control;
pub mod curate;
pub mod embed;
pub mod engine;
pub mod error;
pub mod eval;
pub mod ingest;
pub mod kb;
pub mod lexicon;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod net;
pub mod rank;
pub mod retrieve;
pub mod rpc;
pub mod sorted;
pub mod text;
pub mod watch;
pub mod web;

pub use error::{Error, Result};
