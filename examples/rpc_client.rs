//! A tiny client for `a2rag serve`.
//!
//!     cargo run --example rpc_client -- unix:/tmp/a2rag.sock "Where was Marie Curie born?"
//!     cargo run --example rpc_client -- tcp:127.0.0.1:7411 --token s3cret "Who wrote Dune?"
//!     cargo run --release --example rpc_client -- unix:/tmp/a2rag.sock --bench questions.json [queries]
//!
//! Sends `health`, then `query` for each question and prints the answers. With `--bench`, runs
//! the load generator over the questions of a MuSiQue-style file (`[{"question": ...}]`) or a
//! plain text file (one question per line) with 1 and 16 clients.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use a2rag::bench::rpc::{BenchMethod, BenchOptions, Client, bench_rpc, print_table};
use a2rag::rpc::Listen;

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let address: Listen =
        args.next().context("usage: rpc_client ADDR [--token T] [--bench FILE [N]] [QUESTION...]")?.parse()?;
    let mut token = None;
    let mut bench = None;
    let mut questions = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--token" => token = Some(args.next().context("--token needs a value")?),
            "--bench" => {
                let file = args.next().context("--bench needs a file")?;
                let queries = args.next().map(|n| n.parse()).transpose()?.unwrap_or(500);
                bench = Some((file, queries));
            }
            _ => questions.push(arg),
        }
    }
    if let Some((file, queries)) = bench {
        let questions = load_questions(&file)?;
        let options =
            BenchOptions { address, token, clients: vec![1, 16], queries, policy: None, method: BenchMethod::Query };
        let rows = bench_rpc(&options, &questions).await?;
        print_table(&rows, std::io::stdout())?;
        return Ok(());
    }
    let mut client = Client::connect(&address, token.as_deref()).await?;
    println!("health: {}", client.call("health", json!({})).await?["result"]);
    for question in questions {
        let reply = client.call("query", json!({"question": question})).await?;
        let Some(r) = reply.get("result") else { bail!("query failed: {}", reply["error"]) };
        match (&r["answer"], &r["abstained"]) {
            (Value::String(a), _) => {
                println!("{question}\n  answer: {a}  (proposals: {})", r["proposals"])
            }
            (_, reason) => println!("{question}\n  abstained: {reason}"),
        }
    }
    Ok(())
}

fn load_questions(file: &str) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text) {
        return Ok(items.iter().filter_map(|q| q["question"].as_str().map(String::from)).collect());
    }
    Ok(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
}
