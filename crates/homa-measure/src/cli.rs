//! Behaviour every command-line tool of the project shares.

/// Makes a write to a closed pipe end the process quietly, as `cat` or
/// `head` do (`homa-sim run ... | head` must not panic with "failed
/// printing to stdout"). Rust ignores SIGPIPE by default, turning it into
/// an `EPIPE` error that `println!` reports by panicking; this restores
/// the default action. Call first thing in `main`.
pub fn exit_quietly_on_broken_pipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL installs no Rust
    // handler and touches no memory; it is done once at start-up, before
    // any thread that could race on the disposition exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
