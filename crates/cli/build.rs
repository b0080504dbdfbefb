//! Records the git commit the binary is built from as `TICKFORGE_COMMIT`, for the reports
//! it writes. A build outside a git checkout records none, unless `TICKFORGE_COMMIT` is
//! set in the build's environment (a build from a source archive).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TICKFORGE_COMMIT");
    if std::env::var_os("TICKFORGE_COMMIT").is_some() {
        return;
    }
    if let Some(commit) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=TICKFORGE_COMMIT={commit}");
    }
    // A commit, checkout or reset writes HEAD's reflog (a worktree has its own): build
    // again then, not on every edit of a source file.
    if let Some(log) = git(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "logs/HEAD",
    ]) {
        println!("cargo:rerun-if-changed={log}");
    }
}
