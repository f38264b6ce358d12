//! `make install` of the library (PREFIX, DESTDIR) and its pkg-config file:
//! installs the libraries cargo built for this test into a scratch
//! directory, compiles the examples with `pkg-config --cflags --libs
//! homars` (so against the installed shared library), and runs them.
//! Skips, saying which, without `cc`, `make` or `pkg-config`.

mod support;

use std::path::Path;
use std::process::Command;
use support::{built, lib_dir, out_dir, run, works, Server, CFLAGS, CRATE_DIR, RUN_TIMEOUT};

/// `pkg-config ARGS homars` with the given search settings, split into
/// arguments.
fn pkg_config(env: &[(&str, &Path)], args: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("pkg-config");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).arg("homars");
    run(&mut cmd, RUN_TIMEOUT)
        .stdout
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `make install VARS...` in this crate, with the libraries of this build.
fn make_install(vars: &[String]) {
    run(
        Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(CRATE_DIR)
            .arg("install")
            .arg(format!("BUILD_DIR={}", lib_dir().display()))
            .args(vars),
        RUN_TIMEOUT,
    );
}

/// Compiles example `name` with `flags` (from pkg-config) into `out`.
fn compile(cc: &str, name: &str, flags: &[String], out: &Path) {
    run(
        Command::new(cc)
            .args(CFLAGS)
            .arg(Path::new(CRATE_DIR).join(format!("examples/c/{name}.c")))
            .args(flags)
            .arg("-o")
            .arg(out),
        RUN_TIMEOUT,
    );
}

fn tools_present() -> bool {
    for tool in ["make", "pkg-config"] {
        if !works(tool) {
            eprintln!("skipping: {tool} not found");
            return false;
        }
    }
    true
}

#[test]
fn install_with_prefix_and_build_with_pkg_config() {
    let Some(b) = built() else { return };
    if !tools_present() {
        return;
    }
    let tmp = out_dir("install-prefix");
    let prefix = tmp.join("usr");
    make_install(&[format!("PREFIX={}", prefix.display())]);

    let lib = prefix.join("lib");
    for f in [
        "libhomars.a",
        "libhomars.so",
        "libhomars.so.0.1",
        "libhomars.so.0.1.0",
    ] {
        assert!(lib.join(f).exists(), "{f} not installed");
    }
    assert_eq!(
        std::fs::read_link(lib.join("libhomars.so")).unwrap(),
        Path::new("libhomars.so.0.1")
    );
    assert_eq!(
        std::fs::read(prefix.join("include/homars.h")).unwrap(),
        std::fs::read(Path::new(CRATE_DIR).join("include/homars.h")).unwrap()
    );

    let pc_dir = lib.join("pkgconfig");
    let env = [("PKG_CONFIG_PATH", pc_dir.as_path())];
    assert_eq!(
        pkg_config(&env, &["--modversion"]),
        [env!("CARGO_PKG_VERSION")]
    );
    let flags = pkg_config(&env, &["--cflags", "--libs"]);
    assert!(
        flags.contains(&format!("-I{}", prefix.join("include").display()))
            && flags.contains(&"-lhomars".to_string()),
        "{flags:?}"
    );
    let client = tmp.join("echo_client");
    compile(&b.cc, "echo_client", &flags, &client);
    if works("readelf") {
        let dynamic = run(Command::new("readelf").arg("-d").arg(&client), RUN_TIMEOUT).stdout;
        assert!(
            dynamic.contains("[libhomars.so.0.1]"),
            "the client should need the shared library by its soname:\n{dynamic}"
        );
    }

    // The dynamically linked client against the statically linked server.
    let server = Server::start(&b.bin("echo_server"), &["127.0.0.1:0", "2"]);
    let out = run(
        Command::new(&client)
            .args([server.addr.as_str(), "--quit"])
            .env("LD_LIBRARY_PATH", &lib),
        RUN_TIMEOUT,
    );
    assert!(out.stdout.contains("39 calls OK"), "{}", out.stdout);
    let (status, _) = server.wait(RUN_TIMEOUT);
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&tmp); // a copy of the libraries: large
}

/// Staged: files land under DESTDIR + PREFIX, while the pkg-config file
/// names PREFIX alone (where they will be once the stage is unpacked).
#[test]
fn install_staged_with_destdir() {
    let Some(b) = built() else { return };
    if !tools_present() {
        return;
    }
    let tmp = out_dir("install-destdir");
    let stage = tmp.join("stage");
    make_install(&[
        format!("DESTDIR={}", stage.display()),
        "PREFIX=/opt/homars".into(),
    ]);
    let root = stage.join("opt/homars");
    assert!(root.join("include/homars.h").is_file());
    assert!(root.join("lib/libhomars.a").is_file());
    let pc = std::fs::read_to_string(root.join("lib/pkgconfig/homars.pc")).unwrap();
    assert!(pc.contains("prefix=/opt/homars\n"), "{pc}");
    assert!(
        !pc.contains(stage.to_str().unwrap()),
        "DESTDIR leaked: {pc}"
    );
    assert!(
        pc.contains("Libs.private: -lgcc_s"),
        "static linking needs the system libraries: {pc}"
    );

    // pkg-config with the stage as sysroot finds the staged files.
    let env = [
        ("PKG_CONFIG_LIBDIR", root.join("lib/pkgconfig")),
        ("PKG_CONFIG_SYSROOT_DIR", stage.clone()),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let flags = pkg_config(&env, &["--cflags", "--libs"]);
    let bin = tmp.join("epoll_echo");
    compile(&b.cc, "epoll_echo", &flags, &bin);
    let out = run(
        Command::new(&bin)
            .args(["selftest", "50"])
            .env("LD_LIBRARY_PATH", root.join("lib")),
        RUN_TIMEOUT,
    );
    assert!(out.stdout.contains("50 RPCs OK"), "{}", out.stdout);
    let _ = std::fs::remove_dir_all(&tmp);
}
