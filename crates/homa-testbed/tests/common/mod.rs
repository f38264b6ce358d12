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

/// Command lines of the running processes that contain every one of
/// `needles` (the listing itself left out).
#[allow(dead_code)] // (not every test file uses it)
pub fn processes_with(needles: &[&str]) -> Vec<String> {
    let out = Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .filter(|l| !l.contains(" ps -eo") && needles.iter().all(|n| l.contains(n)))
        .map(str::to_string)
        .collect()
}
