//! The scenarios, one module each.

pub mod flood;
pub mod forge;
pub mod hog;
pub mod late_dup;
pub mod lying_incoming;
pub mod reflect;

use crate::{Error, Result};

/// Rejects a value outside `lo..=hi` with a message naming the option.
pub(crate) fn check_range<T: PartialOrd + std::fmt::Display>(
    name: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<()> {
    if v < lo || v > hi {
        return Err(Error::Usage(format!(
            "{name} must be in {lo}..={hi}, got {v}"
        )));
    }
    Ok(())
}
