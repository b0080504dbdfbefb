//! The checked-in C header is what cbindgen makes of the source: CI fails when it is
//! stale. `TICKFORGE_BLESS_HEADER=1` rewrites it.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses src/lib.rs")
        .write(&mut made);
    let made = String::from_utf8(made).expect("a UTF-8 header");
    let path = dir.join("include/tickforge.h");
    if std::env::var_os("TICKFORGE_BLESS_HEADER").is_some() {
        std::fs::write(&path, &made).expect("writing the header");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != made {
        let line = checked_in
            .lines()
            .zip(made.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || checked_in.lines().count().min(made.lines().count()) + 1,
                |i| i + 1,
            );
        panic!(
            "crates/client-c/include/tickforge.h is stale (first difference at line {line}: \
             the C API in src/lib.rs changed). Regenerate it and commit the result:\n  \
             TICKFORGE_BLESS_HEADER=1 cargo test -p tickforge-client-c --test header"
        );
    }
}
