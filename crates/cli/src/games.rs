//! The games the `tickforge` binary hosts.

/// Registers the built-in games with the server runtime; the first is the default.
pub fn register() {
    tickforge_server::games::register::<tickforge_shooter::Shooter>();
    tickforge_server::games::register::<tickforge_ctf::Ctf>();
}

pub use tickforge_server::games::parser;
