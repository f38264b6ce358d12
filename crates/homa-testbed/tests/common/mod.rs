//! What the end-to-end tests share: whether they can run here, and the
//! clean-up of their testbed.

use std::process::{Command, Stdio};

use homa_testbed::netns;

fn tool_works(tool: &str) -> bool {
    Command::new(tool)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Why this test cannot run here, if it cannot.
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    ["ip", "tc", "bridge"]
        .into_iter()
        .find(|t| !tool_works(t))
        .map(|t| format!("`{t}` is missing"))
}

/// Removes the testbed when the test ends, however it ends.
pub struct Guard(pub String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = netns::down(&self.0);
    }
}
