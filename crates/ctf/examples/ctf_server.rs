//! A studio's own server for its own game, in one call: the runtime is a library.
//!
//! `cargo run -p tickforge-ctf --example ctf_server -- --help` lists every flag of
//! `tickforge serve`; `--game-set captures=5` sets the game's own keys, as does a `[game]`
//! table in a `--config` file.

fn main() {
    tickforge_server::run::<tickforge_ctf::Ctf>();
}
