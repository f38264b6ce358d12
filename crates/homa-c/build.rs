//! Gives the shared library a soname, so that programs linked against it
//! record `libhomars.so.0.1` (ABI-compatible releases share it: while the
//! major version is 0, the minor version is part of it) rather than a bare
//! path. The Makefile installs the matching file and links.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_else(|_| "0".into());
    let abi = if major == "0" {
        format!("{major}.{minor}")
    } else {
        major
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhomars.so.{abi}");
}
