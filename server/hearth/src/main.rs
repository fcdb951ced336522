use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    hearth::cli::run(hearth::cli::Cli::parse()).await
}
