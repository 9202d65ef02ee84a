//! `--output text|json`: every read command prints Kafka-tool-like text by default, or one
//! JSON document for scripts.

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

impl Output {
    pub fn json(self) -> bool {
        self == Output::Json
    }
}

/// Prints `value` as one pretty JSON document.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
