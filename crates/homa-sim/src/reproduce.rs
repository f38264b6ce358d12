//! Published experiment sets.
use std::path::Path;
/// Options.
pub struct Options {
    /// Messages per run.
    pub messages: Option<u64>,
    /// Quick.
    pub quick: bool,
    /// Parallel runs.
    pub jobs: usize,
}
/// The thesis set.
pub fn thesis(_out: &Path, _o: Options) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
